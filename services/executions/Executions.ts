// Paid executions, in the spec's order: everything checked before payment, the payment verified and held in escrow in
// one statement, settlement and the agent call in parallel, both recorded in one transaction (finish.ts); retries and
// status views.
import { SqlClient } from "@effect/sql"
import { Clock, Config, Duration, Effect, Fiber, Option } from "effect"
import { DEFAULT_EXECUTION_TIMEOUT_MS } from "../../layers/AgentProxy.js"
import { AppConfig } from "../../layers/Config.js"
import { holdsPayment, type PresentedPayment } from "../../layers/x402/credential.js"
import type { PaymentRejected } from "../../layers/x402/payment.js"
import { executionMachine } from "../../machines/execution.js"
import { MachineHost } from "../../machines/Host.js"
import { startMachine } from "../../machines/step.js"
import { BadRequest, Conflict, NotFound, PaymentRequired, RateLimited } from "../../src/domain/Errors.js"
import type { ExecuteRequest, ExecutionView } from "../../src/domain/Execution.js"
import { newId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Agents } from "../agents/Agents.js"
import { batch } from "../sql/Batch.js"
import { ExecutionCallbacks } from "../webhooks/Callbacks.js"
import { Circuits } from "../circuits/Circuits.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { Outbox } from "../outbox/Outbox.js"
import { Payments } from "../payments/Payments.js"
import { limitRefusal, spendStatement } from "../limits/statements.js"
import { Paywall } from "../payments/Paywall.js"
import { type LimitsSeen, RateLimits } from "./RateLimits.js"
import { isUniqueViolation, sqlErrorsAsDefects } from "../sql/SqlErrors.js"
import { JsonSchemas } from "../agents/JsonSchemas.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { AgentCall } from "./AgentCall.js"
import { ChainCalls } from "../chains/Children.js"
import { ChainRoots } from "../chains/Root.js"
import { canonical, executionStatements, idempotencyKeyOf, priceOf } from "./create.js"
import { lookUpCallback, prepare } from "./prepare.js"
import { paidCallDeadlineMs } from "./deadline.js"
import { requestHashOf, resending } from "./resend.js"
import { retrying } from "./retry.js"
import { type ExecutionRow, ExecutionsRepo } from "./Repo.js"
import { finish } from "./finish.js"
import * as View from "./View.js"
import type { ExecutionReceipt } from "./receipt.js"
import { Receipts } from "./Receipts.js"
import { withSpan } from "../../layers/observability/span.js"

const isAlreadyUsed = (error: unknown): error is PaymentRequired =>
  error instanceof PaymentRequired && error.details["reason"] === "payment_already_used"

/** Extra time past the agent timeout after which a running attempt with no recorded result is declared dead. */
const DEADLINE_GRACE_MS = 60_000

export interface ExecuteContext {
  /** The payment as presented (x402 v1 or v2 header, or a decoded v2 payload from MCP). */
  readonly payment: PresentedPayment
  readonly async: boolean
  /** X-Chain-Budget: start a chain with this budget (docs/chains.md). */
  readonly chainBudget?: string | undefined
  /** X-Chain-Token: a sub-call inside a chain, paid from its budget (no payment). */
  readonly chainToken?: string | undefined
  /** Where the rate-limit windows are noted once counted, for X-RateLimit-* on whatever answer follows. */
  readonly limits?: LimitsSeen | undefined
}

/** What the HTTP layer turns into headers: the accepted payment and its settlement (the windows: ExecuteContext.limits). */
export interface PaymentUse {
  /** The credential's text (X-PAYMENT-USED), and the x402 version and network name the receipt speaks. */
  readonly header: string
  readonly version: 1 | 2
  readonly payer: string
  readonly network: string
  readonly settlementTxHash: string | null
  /** The payer's signed receipt (receipt.ts), once the call completed and its payment settled; null otherwise. */
  readonly receipt: ExecutionReceipt | null
}

export type ExecuteOutcome =
  /** `payment` is null for a sub-call inside a chain (its chain's budget paid). */
  | { readonly _tag: "Done"; readonly view: ExecutionView; readonly payment: PaymentUse | null }
  | { readonly _tag: "Accepted"; readonly requestId: string; readonly jobId: string | undefined; readonly statusUrl: string; readonly payment: PaymentUse }

export class Executions extends Effect.Service<Executions>()("executions/Executions", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* AppConfig
    const paywall = yield* Paywall
    const payments = yield* Payments
    const ledger = yield* Ledger
    const outbox = yield* Outbox
    const rateLimits = yield* RateLimits
    const callbacks = yield* ExecutionCallbacks
    const repo = yield* ExecutionsRepo
    const check = yield* prepare
    const checkCallbackHost = yield* lookUpCallback
    const resend = yield* resending
    // Work started by a request outlives it (a client hanging up must not abandon a paid execution).
    const scope = yield* Effect.scope
    const retry = yield* retrying(scope)
    const finishPaid = yield* finish
    const receipts = yield* Receipts
    const roots = yield* ChainRoots
    const chained = yield* ChainCalls
    const timeoutMs = yield* Config.integer("EXECUTION_TIMEOUT_MS").pipe(Config.withDefault(DEFAULT_EXECUTION_TIMEOUT_MS))
    const retryWindowMs = 1000 * (yield* Config.integer("EXECUTION_RETRY_WINDOW_SECONDS").pipe(Config.withDefault(600)))
    const answerWithinMs = yield* paidCallDeadlineMs(timeoutMs)

    const load = (id: string) => repo.find(id).pipe(Effect.orDie)

    /** A repeat of an idempotent request: the cached result or current status; the new payment is not used. */
    const repeat = (existing: { readonly id: string; readonly requestHash: string }, requestHash: string, payment: PaymentUse) =>
      Effect.gen(function* () {
        if (existing.requestHash !== requestHash) {
          return yield* new Conflict({
            code: "IDEMPOTENCY_CONFLICT",
            message: "this idempotencyKey was used with a different agent, capability or input",
            details: { requestId: existing.id }
          })
        }
        const row = Option.getOrThrow(yield* load(existing.id))
        // The caller proved to be the same payer (its payment header verified), so the result is theirs to read.
        return { _tag: "Done", view: View.forClient(row, true), payment: { ...payment, receipt: receipts.issue(row) } } satisfies ExecuteOutcome
      })

    const execute = (req: ExecuteRequest, ctx: ExecuteContext) =>
      Effect.gen(function* () {
        if (ctx.chainToken !== undefined) {
          if (ctx.chainBudget !== undefined) {
            const message = "a chained call spends its chain's budget; X-Chain-Budget starts a new chain and cannot go with X-Chain-Token"
            return yield* new BadRequest({ code: "VALIDATION_ERROR", message, details: { issues: [{ path: "X-Chain-Budget", message }] } })
          }
          return { _tag: "Done", view: yield* chained.call(req, ctx.chainToken, ctx.async, ctx.limits), payment: null } satisfies ExecuteOutcome
        }
        // A re-send of a purchase this very header already made is answered from it, whatever changed since (the agent
        // paused, its circuit open); looked up beside the checks, which only a new purchase needs.
        const [again, checked] = yield* Effect.all([resend(req, ctx.payment, ctx.chainBudget), Effect.either(check(req))], { concurrency: 2 })
        if (Option.isSome(again)) return again.value
        const { agent, capability, callbackUrl } = yield* checked
        const agentFee = capability.pricing.basePrice
        const price = priceOf(agentFee)
        const chain = yield* roots.admit(ctx.chainBudget, agent, price, ctx.async || callbackUrl !== undefined)
        // Who pays: an x402 payment of exactly the price, or of the whole budget for a chain's root.
        const { payment: verified, presentation, priced } = yield* paywall.charge(
          {
            amount: Option.match(chain, { onNone: () => price, onSome: (plan) => plan.budget }),
            resource: `${config.publicBaseUrl}/api/v1/execute`,
            description: `${agent.name}: ${capability.name}${Option.isSome(chain) ? " (chain budget)" : ""}`
          },
          ctx.payment
        )
        // The payment is verified, not settled: a refused callback host charges nothing.
        if (callbackUrl !== undefined) yield* checkCallbackHost(req, callbackUrl)
        // Rate limits key on the verified payer: a claimed address in an unverified header cannot spend another's window.
        const window = yield* rateLimits.consume(agent.id, verified.payer, ctx.limits)
        const giveBack = rateLimits.release(agent.id, verified.payer, ctx.limits)
        if (window.exceeded) {
          yield* giveBack
          return yield* new RateLimited({
            code: "RATE_LIMITED",
            message: "too many requests in the current window; nothing was charged",
            details: { retryAfterSeconds: window.resetSeconds, ...rateLimits.limits }
          })
        }
        const payment: PaymentUse = {
          header: presentation.handle,
          version: presentation.version,
          payer: verified.payer,
          network: presentation.network,
          settlementTxHash: null,
          receipt: null
        }
        const requestHash = requestHashOf(req, Option.map(chain, (plan) => plan.budget))
        const idempotencyKey = idempotencyKeyOf(req.idempotencyKey, presentation.paymentIdentifier)
        if (idempotencyKey !== undefined) {
          const existing = yield* repo.findIdempotent(verified.payer, idempotencyKey)
          if (Option.isSome(existing)) return yield* repeat(existing.value, requestHash, payment)
        }

        const now = yield* Clock.currentTimeMillis
        const requestId = newId(ctx.async ? "job" : "req")
        const start = startMachine(executionMachine, { retryWindowMs, deadlineMs: timeoutMs + DEADLINE_GRACE_MS, startedAt: now })
        // Everything the accepted payment causes, as ONE statement (atomic on its own, one round trip): the reservation,
        // the execution with its machine snapshot, the escrow, the ledger hold, the outbox event, the deadline timer and
        // the first transitions (and for a chain's root, the chain with its budget).
        const reservation = payments.reserveStatements(verified, "execution", requestId, now)
        const paymentId = reservation.id
        const rows = executionStatements(sql, {
          requestId,
          paymentId,
          payer: verified.payer,
          agentId: agent.id,
          capabilityId: capability.id,
          input: req.input,
          requestHash,
          idempotencyKey,
          mode: callbackUrl !== undefined ? "callback" : ctx.async ? "async" : "sync",
          callbackUrl,
          agentFee,
          start,
          now,
          ...Option.match(chain, { onNone: () => ({}), onSome: (plan) => ({ chain: { chainId: plan.chainId, depth: 0, parentExecutionId: null } }) })
        })
        // The payment is held in escrow from the moment it is accepted, backed by the settlement it is owed.
        const hold = yield* ledger.transferStatements({
          kind: "escrow_hold",
          movements: [{ debit: Accounts.settlementReceivable, credit: Accounts.escrow, amount: price }],
          paymentId,
          agentId: agent.id,
          subjectId: requestId
        }).pipe(Effect.orDie)
        const chainRows = Option.isNone(chain)
          ? []
          : yield* roots.statements(chain.value, { requestId, paymentId, payer: verified.payer, agentId: agent.id, now })
        // The payer's spending limits count this payment (or refuse it, aborting the whole statement: nothing reserved)
        // in the same statement: atomic under concurrency, no extra round trip (services/limits).
        const created = yield* batch(sql, [
          spendStatement(sql, { paymentId, payer: verified.payer, agentId: agent.id, amount: verified.amount, now }),
          ...reservation.statements,
          ...chainRows,
          ...rows.statements,
          ...hold.statements,
          outbox.emitStatement("payment.received", agent.id, {
            paymentId,
            purpose: "execution",
            requestId,
            agentId: agent.id,
            amount: formatUsdc(verified.amount),
            payer: verified.payer,
            ...Option.match(chain, { onNone: () => ({}), onSome: (plan) => ({ chainId: plan.chainId }) })
          })
        ]).pipe(
          Effect.as({ paymentId }),
          Effect.catchTag("SqlError", (error): Effect.Effect<ExecuteOutcome, Conflict | PaymentRejected> => {
            const overLimit = limitRefusal(error)
            if (overLimit !== undefined) return Effect.fail(overLimit)
            return isUniqueViolation(error, "executions_idempotency") && idempotencyKey !== undefined
              ? Effect.flatMap(repo.findIdempotent(verified.payer, idempotencyKey).pipe(Effect.orDie), (existing) =>
                Option.isSome(existing) ? repeat(existing.value, requestHash, payment) : Effect.die(error))
              : payments.alreadyUsed(error).pipe(Effect.catchTag("SqlError", Effect.die))
          }),
          Effect.catchTag("PaymentRejected", (rejection) => Effect.zipRight(giveBack, Effect.fail(priced.refuse(rejection))))
        )
        if ("_tag" in created) return created

        // A chain's root: its payment settles first, then the root agent is called with its token (Root.ts). Otherwise
        // settlement and the agent call at the same time, recorded together (finish.ts).
        const requirements = priced.accepts[0]!
        const work = Option.match(chain, {
          onSome: (plan) =>
            Effect.as(roots.run(plan, { requestId, paymentId: created.paymentId, payment: verified, requirements, agent, capability, input: req.input, startedAt: new Date(now) }), Option.none<ExecutionRow>()),
          onNone: () => finishPaid({ requestId, paymentId: created.paymentId, payment: verified, requirements, agent, capability, input: req.input })
        }).pipe(Effect.catchAllCause((cause) =>
          Effect.as(Effect.logError(`execution ${requestId}: background work failed; workers will finish it`, cause), Option.none<ExecutionRow>())))
        const fiber = yield* Effect.forkIn(work, scope)
        const statusUrl = `${config.publicBaseUrl}/api/v1/execute/${requestId}`
        if (ctx.async || callbackUrl !== undefined) {
          return { _tag: "Accepted", requestId, jobId: ctx.async ? requestId : undefined, statusUrl, payment } satisfies ExecuteOutcome
        }
        // One deadline for the whole paid call after its payment was accepted (agent and settlement together): past
        // it the client gets the job's status URL, as an async call would, and the work goes on (a slow chain, a
        // flaky provider). Interrupting the join leaves the forked work running.
        const joined = yield* Fiber.join(fiber).pipe(Effect.timeout(Duration.millis(answerWithinMs)), Effect.option)
        if (Option.isNone(joined)) {
          yield* Effect.logWarning("paid call past its deadline: answered with its status URL, the work goes on", { requestId, deadlineMs: answerWithinMs })
          return { _tag: "Accepted", requestId, jobId: undefined, statusUrl, payment } satisfies ExecuteOutcome
        }
        // The row as the final transaction left it when it settled the payment; otherwise read back.
        const finished = joined.value
        const row = Option.isSome(finished) ? finished.value : Option.getOrThrow(yield* load(requestId))
        const settledHash = row.settlementState === "settled" ? row.settlementTxHash : null
        const view = View.forClient(row, true)
        const answered = Option.isNone(chain)
          ? view
          : { ...view, transactionId: row.transactionId, chain: (yield* roots.rootToken(chain.value, { requestId, agentId: agent.id, payer: verified.payer, startedAt: new Date(now) })).info }
        return { _tag: "Done", view: answered, payment: { ...payment, settlementTxHash: settledHash, receipt: receipts.issue(row) } } satisfies ExecuteOutcome
      }).pipe(
        // Lost the race to its own twin (the same header sent twice at once), or the twin was recorded meanwhile.
        Effect.catchIf(isAlreadyUsed, (used) =>
          Effect.flatMap(resend(req, ctx.payment, ctx.chainBudget), Option.match({ onNone: () => Effect.fail(used), onSome: Effect.succeed }))),
        sqlErrorsAsDefects,
        withSpan("Executions.execute")
      )

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

    return { execute, status, retry } as const
  }),
  dependencies: [Agents.Default, Paywall.Default, Payments.Default, Ledger.Default, Outbox.Default, MachineHost.Default, Circuits.Default, RateLimits.Default, ExecutionCallbacks.Default, ExecutionsRepo.Default, AgentCall.Default, JsonSchemas.Default, UrlGuard.Default, ChainRoots.Default, ChainCalls.Default, Receipts.Default]
}) {}
