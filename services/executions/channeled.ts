// The pipeline with a batch-settlement channel as funding (x402 v2 PAYMENT-SIGNATURE naming scheme
// "batch-settlement"): admit (the checks before payment, the price: a metered capability's maximum), fund (the voucher
// verified off chain against our channel row: config ours, the payer's signature, the cumulative rule, else the
// corrective 402; a deposit is sent and included first), reserve (one transaction: the channel's compare-and-set
// charge, spending limits, a settled payment row, the execution, the escrow held from the channel's receivable,
// payment.received, the rate-limit windows), run (the agent), record (one transaction: the metered charge, the machine,
// the charge kept at what was used or given back) and answer (PAYMENT-RESPONSE with the charged amount).
import { Clock, Effect, Option, type Scope } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import { decodeChannelPaymentSignature } from "../../layers/x402/batchSettlement/payloads.js"
import type { PaymentCredential } from "../../layers/x402/credential.js"
import { decodeBase64Json } from "../../layers/x402/header.js"
import { namesBatchSettlement } from "../../layers/x402/batchSettlement/offer.js"
import { PaymentRejected, sha256 } from "../../layers/x402/payment.js"
import { caip2Of } from "../../layers/x402/v2.js"
import { executionMachine } from "../../machines/execution.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import { Conflict, type PaymentRequired, type RateLimited } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import type { BudgetPurchase, PlannedBudget, RootCall, X402Funding } from "../../src/domain/Funding.js"
import { newId, newPaymentId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { isMetered, meterOf, quoteOf } from "../../src/domain/Pricing.js"
import { ChannelsRepo } from "../channels/Repo.js"
import { ChannelTerms } from "../channels/Terms.js"
import { Accounts } from "../ledger/Ledger.js"
import { limitRefusal, spendStatement } from "../limits/statements.js"
import { isPaymentReplay, prepaidPaymentStatement } from "../payments/Repo.js"
import { batch } from "../sql/Batch.js"
import { isUniqueViolation, sqlErrorsAsDefects } from "../sql/SqlErrors.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { ChannelFunds, ChannelRefused } from "./channelFunds.js"
import { executionStatements } from "./create.js"
import type { Timing } from "./deadline.js"
import { steppedExecution } from "./executionSpec.js"
import { meteredColumns } from "./metering.js"
import type { ExecuteContext, ExecuteOutcome, PaymentUse } from "./outcome.js"
import { requestHashOf } from "./resend.js"
import { pipelineParts } from "./pipeline.js"
import * as View from "./View.js"

/** The credential of a funding that pays by channel: an x402 v2 payload naming `batch-settlement` (a call, or a chain's budget). */
export const channelCredential = (funding: X402Funding): Effect.Effect<Option.Option<PaymentCredential>> => {
  const presented = funding.payment
  if (presented === undefined || presented instanceof PaymentRejected || presented.version !== 2) {
    return Effect.succeed(Option.none())
  }
  return decodeBase64Json(presented.raw.trim(), "PAYMENT-SIGNATURE").pipe(
    Effect.map((json) => (namesBatchSettlement(json) ? Option.some(presented) : Option.none())),
    Effect.orElseSucceed(() => Option.none<PaymentCredential>())
  )
}

export const channelling = (scope: Scope.Scope, timing: Timing) => Effect.gen(function* () {
  const { sql, config, answer, paywall, ledger, outbox, rateLimits, repo, receipts, host, agentCall, circuits, metering, quotes, check, checkCallbackHost, load } =
    yield* pipelineParts(scope, timing)
  const channels = yield* ChannelsRepo
  const terms = yield* ChannelTerms
  const funds = yield* ChannelFunds

  /** The row as the client reads it, with what the channel kept of this call's charge (and a chain root's chain). */
  const answered = (requestId: string, payment: PaymentUse, chain: Option.Option<{ readonly plan: PlannedBudget; readonly root: RootCall }> = Option.none()) =>
    Effect.gen(function* () {
      const row = Option.getOrThrow(yield* load(requestId))
      const use = yield* funds.chargeOf(requestId, payment)
      const view = Option.isNone(chain) ? View.forClient(row, true)
        : { ...View.forClient(row, true), transactionId: row.transactionId, chain: yield* chain.value.plan.info(chain.value.root) }
      return { _tag: "Done", view, payment: { ...use, receipt: receipts.issue(row) } } satisfies ExecuteOutcome
    })

  return (req: ExecuteRequest, credential: PaymentCredential, budget: BudgetPurchase | undefined, ctx: ExecuteContext) =>
    Effect.gen(function* () {
      // 1. Admit: the checks every paid call makes; a metered capability holds its maximum. A chain's root
      // (X-Chain-Budget) charges the chain's whole budget to the channel, and a chain's calls keep flat pricing.
      const { agent, capability, callbackUrl } = yield* check(req)
      const { agentFee, price } = quoteOf(capability, budget === undefined ? "x402" : "chain")
      const chain = budget === undefined ? Option.none<PlannedBudget>() : Option.some(yield* budget.plan(agent, price, ctx.async || callbackUrl !== undefined))
      const metered = Option.isNone(chain) && isMetered(capability.pricing)
      const amount = Option.match(chain, { onNone: () => price, onSome: (plan) => plan.budget })
      const priced = paywall.price({
        amount,
        resource: `${config.publicBaseUrl}/api/v1/execute`,
        description: `${agent.name}: ${capability.name}${Option.isSome(chain) ? " (chain budget)" : ""}`,
        channels: true,
        chainBudget: Option.isSome(chain),
        upto: metered
      })
      const refuse = funds.refusing(priced, amount)

      // 2. Fund: the payload decoded and verified against our channel; a deposit is included on chain first.
      const raw = credential.raw.trim()
      const decoded = yield* decodeChannelPaymentSignature(raw).pipe(Effect.mapError(priced.refuse))
      const network = terms.all.find((t) => caip2Of(t.chainId) === decoded.accepted.network)
      if (network === undefined) {
        return yield* refuse(new ChannelRefused({ reason: "invalid_network", message: `batch-settlement is not offered on ${decoded.accepted.network}` }))
      }
      const headerSha256 = sha256(raw)
      // A re-send of a header that already paid a call answers that call (a client that lost the answer).
      const resent = funds.resent(headerSha256, req)
      const funded = yield* funds.fund(decoded, network, amount).pipe(
        Effect.catchTag("ChannelRefused", (refused) =>
          Effect.flatMap(resent, Option.match({ onNone: () => refuse(refused), onSome: (id) => Effect.succeed({ _tag: "Resent" as const, id }) })))
      )
      const payer = funded._tag === "Resent" ? "" : funded.payer
      const payment: PaymentUse = { header: raw, version: 2, payer, network: decoded.accepted.network, settlementTxHash: null, receipt: null, funding: "channel" }
      if (funded._tag === "Resent") return yield* answered(funded.id, { ...payment, payer: Option.getOrThrow(yield* load(funded.id)).payer })

      const quote = metered && meterOf(capability.pricing).unit === "micro-usdc" ? yield* quotes.forPayer(agent, capability, req.input, payer) : undefined
      if (callbackUrl !== undefined) yield* checkCallbackHost(req, callbackUrl)
      // Rate limits: a new call counts its windows in the reservation's statement (step 3); a repeat of an idempotent
      // request here, and gives them back (it is no new call).
      const repeatWindows = Effect.flatMap(rateLimits.admit(agent.id, payer, ctx.limits, "charged"), (giveBack) => giveBack)
      const requestHash = requestHashOf(req, Option.map(chain, (plan) => plan.budget))
      if (req.idempotencyKey !== undefined) {
        const existing = yield* repo.findIdempotent(payer, req.idempotencyKey)
        if (Option.isSome(existing)) {
          yield* repeatWindows
          if (existing.value.requestHash !== requestHash) {
            return yield* new Conflict({ code: "IDEMPOTENCY_CONFLICT", message: "this idempotencyKey was used with a different agent, capability or input", details: { requestId: existing.value.id } })
          }
          return yield* answered(existing.value.id, payment)
        }
      }

      // 3. Reserve, in one transaction: the channel's compare-and-set charge first, then every row at once.
      const now = yield* Clock.currentTimeMillis
      const requestId = newId(ctx.async ? "job" : "req")
      const paymentId = newPaymentId()
      // Paid from the start (the channel's receivable); a failure gives the charge back to the channel (the machine's `credit`).
      const started = startMachine(executionMachine, { retryWindowMs: timing.retryWindowMs, deadlineMs: timing.deadlineMs, startedAt: now, credit: true })
      const settled = stepMachine(executionMachine, started.persisted, { type: "PAYMENT_SETTLED", at: now })
      const rows = executionStatements(sql, {
        requestId,
        paymentId,
        payer,
        agentId: agent.id,
        capabilityId: capability.id,
        input: req.input,
        requestHash,
        idempotencyKey: req.idempotencyKey,
        mode: callbackUrl !== undefined ? "callback" : ctx.async ? "async" : "sync",
        callbackUrl,
        agentFee,
        start: { ...started, snapshot: settled.snapshot, persisted: settled.persisted },
        now,
        metered: Option.isNone(chain) ? meteredColumns(capability, quote, "channel", price) : {},
        ...Option.match(chain, { onNone: () => ({}), onSome: (plan) => ({ chain: { chainId: plan.chainId, depth: 0, parentExecutionId: null } }) })
      })
      // A chain's budget beyond the root's price goes from the channel's receivable into the chain's budget.
      const root: RootCall = { requestId, paymentId, payer, agentId: agent.id, now, receivable: Accounts.channelReceivable }
      const chainRows = Option.isNone(chain) ? [] : yield* chain.value.statements(root)
      const hold = yield* ledger.transferStatements({
        kind: "channel_charge",
        movements: [{ debit: Accounts.channelReceivable, credit: Accounts.escrow, amount: price }],
        paymentId,
        agentId: agent.id,
        subjectId: requestId
      }).pipe(Effect.orDie)
      const reserved = yield* sql.withTransaction(Effect.gen(function* () {
        const charged = yield* funds.charge(funded, requestId, amount)
        yield* batch(sql, [
          spendStatement(sql, { paymentId, payer, agentId: agent.id, amount, now }),
          prepaidPaymentStatement(sql, {
            purpose: "channel",
            paymentId,
            requestId,
            payer,
            payTo: network.receiver.toLowerCase(),
            asset: network.token.toLowerCase(),
            network: network.network,
            amount,
            nonce: `0x${sha256(`channel:${requestId}`)}`,
            validBefore: 0,
            headerSha256,
            now,
            signature: funded.voucher.signature.toLowerCase(),
            channelId: funded.channelId
          }),
          ...chainRows,
          ...rows.statements,
          ...hold.statements,
          outbox.emitStatement("payment.received", agent.id, {
            paymentId,
            purpose: "execution",
            funding: "channel",
            channelId: funded.channelId,
            requestId,
            agentId: agent.id,
            amount: formatUsdc(amount),
            payer,
            ...Option.match(chain, { onNone: () => ({}), onSome: (plan) => ({ chainId: plan.chainId }) })
          }),
          rateLimits.countStatement(agent.id, payer, now)
        ]).pipe(Effect.tap((counts) => rateLimits.counted(counts, ctx.limits)))
        // The budget is charged to the channel with the reservation: the chain is funded at once.
        if (Option.isSome(chain)) yield* host.deliver("chain", chain.value.chainId, { type: "FUNDED", at: now })
        return charged
      })).pipe(
        // A refused charge rolled the whole transaction back: no window was counted.
        Effect.catchTag("ChannelRefused", refuse),
        Effect.catchTag("SqlError", (error): Effect.Effect<ExecuteOutcome, PaymentRequired | RateLimited> => {
          const overRate = rateLimits.refusal(error, now, ctx.limits, "charged")
          if (overRate !== undefined) return overRate
          const overLimit = limitRefusal(error)
          if (overLimit !== undefined) return Effect.fail(priced.refuse(overLimit))
          if (isUniqueViolation(error, "executions_idempotency") && req.idempotencyKey !== undefined) {
            return Effect.flatMap(repo.findIdempotent(payer, req.idempotencyKey).pipe(Effect.orDie), (existing) =>
              Option.isSome(existing) ? Effect.zipRight(repeatWindows, answered(existing.value.id, payment)) : Effect.die(error))
          }
          // The same header raced itself: the other request made the call.
          if (isPaymentReplay(error)) {
            return Effect.flatMap(resent, Option.match({ onNone: () => Effect.die(error), onSome: (id) => answered(id, payment) }))
          }
          return Effect.die(error)
        })
      )
      if ("_tag" in reserved) return reserved

      // 4. Run and record: the agent, then one transaction with the metered charge, the machine's step (release, or the
      // charge back to the channel on failure) and the charge kept at the call's final price.
      return yield* answer({
        requestId,
        async: ctx.async,
        callback: callbackUrl !== undefined,
        payment: { ...payment, channel: funds.useOf(funded, amount, reserved) },
        work: Effect.gen(function* () {
          const callContext = Option.isSome(chain) ? yield* chain.value.callContext(root) : undefined
          const outcome = yield* agentCall.call({ id: requestId, input: req.input }, agent, capability, callContext)
          const after = yield* UnitOfWork.transaction(sql)(Effect.gen(function* () {
            if (metered) yield* metering.charge(requestId, outcome, true)
            yield* host.deliver("execution", requestId, outcome.event)
            const row = yield* steppedExecution(requestId)
            // A chain's root keeps its charge (the budget) until the chain ends: the chain keeps what it spent.
            if (Option.isNone(chain) && Option.isSome(row) && row.value.status === "completed") yield* channels.keep(requestId, row.value.price)
            return row
          }))
          yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
          if (Option.isSome(chain)) yield* host.deliverNow("chain", chain.value.chainId, { type: "CHECK", at: yield* Clock.currentTimeMillis })
          return Option.isSome(chain) ? Option.none() : after
        }),
        // The row as the record transaction left it: what the channel kept follows from it (no read back).
        done: (finished) => Option.match(finished, {
          onNone: () => answered(requestId, payment, Option.map(chain, (plan) => ({ plan, root }))),
          onSome: (row) => {
            const chargedAmount = row.status === "completed" ? row.price : 0n
            const channel = { channelId: funded.channelId, chargedAmount, chargedCumulative: funded.expected + chargedAmount }
            return Effect.succeed({ _tag: "Done", view: View.forClient(row, true), payment: { ...payment, channel, receipt: receipts.issue(row) } } satisfies ExecuteOutcome)
          }
        })
      })
    }).pipe(sqlErrorsAsDefects, withSpan("Executions.channeled"))
})
