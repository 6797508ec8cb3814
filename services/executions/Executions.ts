// The one paid-call pipeline: admit → fund → reserve → run → record, whatever pays (src/domain/Funding.ts): an x402
// payment (paid.ts: of the price, or of a chain's whole budget), a chain's budget (chained.ts) or the payer's credit
// (credited.ts); retries and status views.
import { Effect, Option } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { holdsPayment } from "../../layers/x402/credential.js"
import { MachineHost } from "../../machines/Host.js"
import { NotFound } from "../../src/domain/Errors.js"
import type { ExecuteRequest, ExecutionView } from "../../src/domain/Execution.js"
import type { Funding } from "../../src/domain/Funding.js"
import { Agents } from "../agents/Agents.js"
import { JsonSchemas } from "../agents/JsonSchemas.js"
import { ChannelsRepo } from "../channels/Repo.js"
import { ChannelTerms } from "../channels/Terms.js"
import { Circuits } from "../circuits/Circuits.js"
import { Ledger } from "../ledger/Ledger.js"
import { CreditSpends } from "../remainders/CreditSpends.js"
import { Outbox } from "../outbox/Outbox.js"
import { Payments } from "../payments/Payments.js"
import { Paywall } from "../payments/Paywall.js"
import { sqlErrorsAsDefects } from "../sql/SqlErrors.js"
import { ExecutionCallbacks } from "../webhooks/Callbacks.js"
import { AgentCall } from "./AgentCall.js"
import { chaining } from "./chained.js"
import { channelCredential, channelling } from "./channeled.js"
import { ChannelFunds } from "./channelFunds.js"
import { crediting } from "./credited.js"
import { timing } from "./deadline.js"
import type { ExecuteContext, ExecuteOutcome } from "./outcome.js"
import { paying } from "./paid.js"
import { uptoPaying } from "./upto.js"
import { uptoCredential, UptoFunds } from "./uptoFunds.js"
import { UptoSettlements } from "../payments/UptoSettlements.js"
import { prepare } from "./prepare.js"
import { RateLimits } from "./RateLimits.js"
import { Metering } from "./metering.js"
import { Quotes } from "./quote.js"
import { Receipts } from "./Receipts.js"
import { type ExecutionRow, ExecutionsRepo } from "./Repo.js"
import { retrying } from "./retry.js"
import * as View from "./View.js"

export class Executions extends Effect.Service<Executions>()("executions/Executions", {
  scoped: Effect.gen(function* () {
    const callbacks = yield* ExecutionCallbacks
    const repo = yield* ExecutionsRepo
    // Work started by a request outlives it (a client hanging up must not abandon a paid execution).
    const scope = yield* Effect.scope
    const retry = yield* retrying(scope)
    const clocks = yield* timing
    const paid = yield* paying(scope, clocks)
    const chained = yield* chaining(clocks)
    const credited = yield* crediting(scope, clocks)
    const channeled = yield* channelling(scope, clocks)
    const upto = yield* uptoPaying(scope, clocks)
    /** The checks before payment (agent, capability, input, circuit, callback URL): also what a chain's budget check needs. */
    const admit = yield* prepare

    const load = (id: string) => repo.find(id).pipe(Effect.orDie)

    /** One paid call; `funding` says what pays for it. */
    const execute = (req: ExecuteRequest, funding: Funding, ctx: ExecuteContext) => {
      switch (funding._tag) {
        case "X402":
          // A batch-settlement voucher (or deposit) pays from the payer's channel (a call, or a chain's whole budget); an
          // upto authorization a metered call's maximum, settling what it used.
          return Effect.flatMap(channelCredential(funding), Option.match({
            onNone: () => Effect.flatMap(uptoCredential(funding), Option.match({
              onNone: () => paid(req, funding, ctx),
              onSome: (credential) => upto(req, credential, ctx)
            })),
            onSome: (credential) => channeled(req, credential, funding.budget, ctx)
          }))
        case "Credit":
          return credited(req, funding, ctx)
        case "ChainBudget":
          return chained(req, funding, ctx.limits).pipe(
            Effect.map((view): ExecuteOutcome => ({ _tag: "Done", view, payment: null })),
            sqlErrorsAsDefects,
            withSpan("Executions.execute")
          )
      }
    }

    /**
     * Whether `proofs` hold this execution's credential: its payment header (a sub-call's: its random read-back handle),
     * or, for a call inside a chain, the chain's root payment header (the chain's payer reads the whole tree).
     */
    const holdsExecution = (row: ExecutionRow, proofs: ReadonlyArray<string>) =>
      holdsPayment(proofs, row.headerSha256) ? Effect.succeed(true)
        : row.chainId === null || proofs.length === 0 ? Effect.succeed(false)
        : Effect.map(repo.chainPaymentSha256(row.chainId).pipe(Effect.orDie), Option.match({ onNone: () => false, onSome: (root) => holdsPayment(proofs, root) }))

    /** Status for anyone; output and cost only for the holder of the original payment header (either version's header). */
    const status = (id: string, proofs: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const row = yield* load(id)
        if (Option.isNone(row)) return yield* new NotFound({ code: "EXECUTION_NOT_FOUND", message: `no execution ${id}` })
        const reveal = yield* holdsExecution(row.value, proofs)
        const view = View.forClient(row.value, reveal)
        const callback = reveal && row.value.callbackUrl !== null ? yield* Effect.orDie(callbacks.status(id)) : Option.none()
        return Option.match(callback, { onNone: () => view, onSome: (c): ExecutionView => ({ ...view, callback: c }) })
      })

    return { execute, admit, status, retry } as const
  }),
  dependencies: [Agents.Default, Paywall.Default, Payments.Default, Ledger.Default, Outbox.Default, MachineHost.Default, Circuits.Default, RateLimits.Default, ExecutionCallbacks.Default, ExecutionsRepo.Default, AgentCall.Default, JsonSchemas.Default, UrlGuard.Default, Receipts.Default, Quotes.Default, Metering.Default, CreditSpends.Default, ChannelFunds.Default, ChannelsRepo.Default, ChannelTerms.Default, UptoFunds.Default, UptoSettlements.Default]
}) {}
