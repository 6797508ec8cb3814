// The pipeline with x402 funding (a payment of the price, or of a chain's whole budget): admit (a re-send of a finished
// purchase, the checks before payment), fund (the 402 challenge or the verified payment, the rate-limit window), reserve
// (one statement: limits, payment, execution, escrow, hold, event), run (settle and call the agent), record (one
// transaction: the machine and the settlement) and answer.
import { SqlClient } from "@effect/sql"
import { withSpan } from "../../layers/observability/span.js"
import { Clock, Effect, Option, type Scope } from "effect"
import { AppConfig } from "../../layers/Config.js"
import type { PaymentRejected } from "../../layers/x402/payment.js"
import { executionMachine } from "../../machines/execution.js"
import { startMachine } from "../../machines/step.js"
import { Conflict, type RateLimited } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import type { PlannedBudget, RootCall, X402Funding } from "../../src/domain/Funding.js"
import { newId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { isMetered, priceOf, quoteOf } from "../../src/domain/Pricing.js"
import { Accounts, Ledger } from "../ledger/Ledger.js"
import { limitRefusal, spendStatement } from "../limits/statements.js"
import { Outbox } from "../outbox/Outbox.js"
import { Payments } from "../payments/Payments.js"
import { Paywall } from "../payments/Paywall.js"
import { batch } from "../sql/Batch.js"
import { isUniqueViolation, sqlErrorsAsDefects } from "../sql/SqlErrors.js"
import { executionStatements, idempotencyKeyOf } from "./create.js"
import { answering } from "./answer.js"
import type { Timing } from "./deadline.js"
import { finish, settleFirst } from "./finish.js"
import type { ExecuteContext, ExecuteOutcome, PaymentUse } from "./outcome.js"
import { meteredColumns } from "./metering.js"
import { lookUpCallback, prepare } from "./prepare.js"
import { Quotes } from "./quote.js"
import { RateLimits } from "./RateLimits.js"
import { Receipts } from "./Receipts.js"
import { type ExecutionRow, ExecutionsRepo } from "./Repo.js"
import { requestHashOf, resending } from "./resend.js"
import * as View from "./View.js"

export const paying = (scope: Scope.Scope, timing: Timing) => Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const config = yield* AppConfig
  const paywall = yield* Paywall
  const payments = yield* Payments
  const ledger = yield* Ledger
  const outbox = yield* Outbox
  const rateLimits = yield* RateLimits
  const repo = yield* ExecutionsRepo
  const receipts = yield* Receipts
  const check = yield* prepare
  const checkCallbackHost = yield* lookUpCallback
  const resend = yield* resending
  const finishPaid = yield* finish
  const settleBudget = yield* settleFirst
  const answer = answering(scope, timing, config.publicBaseUrl)
  const quotes = yield* Quotes

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

  /**
   * A repeat of an idempotent request, unless it is a re-send of that request's own header: answered as one, its
   * rate-limit window given back (a re-send is no new request).
   */
  const orRepeat = <E>(req: ExecuteRequest, funding: X402Funding, giveBack: Effect.Effect<void, E>, existing: { readonly id: string; readonly requestHash: string }, requestHash: string, payment: PaymentUse) =>
    Effect.flatMap(resend(req, funding), (again): Effect.Effect<ExecuteOutcome, Conflict | E> =>
      Option.isSome(again) ? Effect.as(giveBack, again.value) : repeat(existing, requestHash, payment))

  /**
   * A re-send of a purchase this very header already made is answered from it, whatever changed since (the agent
   * paused, its circuit open, the authorization now used on chain). It is looked up only when the way to a new
   * reservation fails, the reservation's unique violation on the header included: a new purchase (every call but a
   * re-send) pays no look-up. None: the failure stands.
   */
  const orResent = <A, E, R>(req: ExecuteRequest, funding: X402Funding, self: Effect.Effect<A, E, R>) =>
    Effect.catchAll(sqlErrorsAsDefects(self), (error) =>
      Effect.flatMap(resend(req, funding), Option.match({ onNone: () => Effect.fail(error), onSome: (answer): Effect.Effect<A | ExecuteOutcome, E> => Effect.succeed(answer) })))

  /** Admit, fund and reserve: the answer of a re-send or a repeat, or the reserved call to run. */
  const reserve = (req: ExecuteRequest, funding: X402Funding, ctx: ExecuteContext) =>
    Effect.gen(function* () {
      // 1. Admit.
      const { agent, capability, callbackUrl } = yield* check(req)
      // A metered capability's payment authorises its maximum (src/domain/Pricing.ts), whatever a dynamic one's agent
      // quotes; so the payment is verified before that quote is asked, and strangers cannot make a payer wait for one
      // (quote.ts). A chain's root buys a budget, and a chain's calls keep flat pricing (basePrice per call): metering is
      // for calls paid on their own.
      const metered = funding.budget === undefined
      const { agentFee, price } = quoteOf(capability, metered ? "x402" : "chain")
      const chain = funding.budget === undefined
        ? Option.none<PlannedBudget>()
        : Option.some(yield* funding.budget.plan(agent, price, ctx.async || callbackUrl !== undefined))
      const charge = (quote: bigint | undefined) => ({
        amount: Option.match(chain, { onNone: () => price, onSome: (plan) => plan.budget }),
        resource: `${config.publicBaseUrl}/api/v1/execute`,
        // A channel voucher may pay instead (channeled.ts): a call of its own, or a chain's whole budget.
        channels: true,
        chainBudget: Option.isSome(chain),
        // A metered call of its own may authorize its maximum with upto instead (upto.ts) and settle only what it used.
        upto: Option.isNone(chain) && isMetered(capability.pricing),
        description: `${agent.name}: ${capability.name}${Option.isSome(chain) ? " (chain budget)" : ""}${
          metered && isMetered(capability.pricing) ? ` (metered: at most ${formatUsdc(price)}${quote === undefined ? "" : `, quoted ${formatUsdc(priceOf(quote))}`}, the rest goes back)` : ""}`
      })
      // Unpaid: the challenge, naming the agent's quote when one can be had without taking a payer's place.
      const unpaid = funding.payment === undefined && metered ? yield* quotes.forChallenge(agent, capability, req.input, ctx.client) : undefined

      // 2. Fund: an x402 payment of exactly the price, or of the whole budget for a chain's root.
      const { payment: verified, presentation, priced: paidFor } = yield* paywall.charge(charge(unpaid), funding.payment)
      // The payment is verified, not settled: a refused callback host charges nothing.
      if (callbackUrl !== undefined) yield* checkCallbackHost(req, callbackUrl)
      // Rate limits key on the verified payer: a claimed address in an unverified header cannot spend another's window.
      // A new purchase counts them in its reservation statement (step 3); a repeat of an idempotent request here.
      const admitRepeat = rateLimits.admit(agent.id, verified.payer, ctx.limits, "charged")
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
        if (Option.isSome(existing)) return yield* orRepeat(req, funding, yield* admitRepeat, existing.value, requestHash, payment)
      }

      // The quote of a dynamic capability, under the verified payer's own limits (none for a repeat: it is not charged).
      const quote = metered ? yield* quotes.forPayer(agent, capability, req.input, verified.payer) : undefined
      const priced = quote === undefined ? paidFor : paywall.price(charge(quote))

      // 3. Reserve. Everything the accepted payment causes, as ONE statement (atomic on its own, one round trip): the
      // reservation, the execution with its machine snapshot, the escrow, the ledger hold, the outbox event, the
      // deadline timer and the first transitions (and for a chain's root, the chain with its budget).
      const now = yield* Clock.currentTimeMillis
      const requestId = newId(ctx.async ? "job" : "req")
      const start = startMachine(executionMachine, { retryWindowMs: timing.retryWindowMs, deadlineMs: timing.deadlineMs, startedAt: now })
      const reservation = payments.reserveStatements(verified, "execution", requestId, now)
      const paymentId = reservation.id
      const root: RootCall = { requestId, paymentId, payer: verified.payer, agentId: agent.id, now }
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
        metered: Option.isNone(chain) ? meteredColumns(capability, quote, ctx.remainder ?? "chain", price) : {},
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
      const chainRows = Option.isNone(chain) ? [] : yield* chain.value.statements(root)
      // The payer's spending limits count this payment (or refuse it, aborting the whole statement: nothing reserved)
      // in the same statement: atomic under concurrency, no extra round trip (services/limits). So do the rate-limit
      // windows (its main query, run first: over a window, nothing is reserved and nothing counted).
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
        }),
        rateLimits.countStatement(agent.id, verified.payer, now)
      ]).pipe(
        Effect.tap((counts) => rateLimits.counted(counts, ctx.limits)),
        Effect.as({ paymentId }),
        Effect.catchTag("SqlError", (error): Effect.Effect<ExecuteOutcome, Conflict | PaymentRejected | RateLimited> => {
          const overRate = rateLimits.refusal(error, now, ctx.limits, "charged")
          if (overRate !== undefined) return overRate
          const overLimit = limitRefusal(error)
          if (overLimit !== undefined) return Effect.fail(overLimit)
          return isUniqueViolation(error, "executions_idempotency") && idempotencyKey !== undefined
            ? Effect.flatMap(repo.findIdempotent(verified.payer, idempotencyKey).pipe(Effect.orDie), (existing) =>
              Option.isSome(existing) ? Effect.flatMap(admitRepeat, (giveBack) => orRepeat(req, funding, giveBack, existing.value, requestHash, payment)) : Effect.die(error))
            : payments.refused(error).pipe(Effect.catchTag("SqlError", Effect.die))
        }),
        // The aborted reservation counted nothing: no window to give back (the refusal still says what they hold).
        Effect.catchTag("PaymentRejected", (rejection) => Effect.zipRight(rateLimits.peek(agent.id, verified.payer, ctx.limits), Effect.fail(priced.refuse(rejection))))
      )
      if ("_tag" in created) return created
      return { _tag: "Reserved", requestId, paymentId: created.paymentId, verified, priced, agent, capability, callbackUrl, chain, root, payment } as const
    })

  return (req: ExecuteRequest, funding: X402Funding, ctx: ExecuteContext) =>
    Effect.gen(function* () {
      const reserved = yield* orResent(req, funding, reserve(req, funding, ctx))
      if (reserved._tag !== "Reserved") return reserved
      const { requestId, verified, priced, agent, capability, callbackUrl, chain, root, payment } = reserved

      // 4. Run and record: settlement and the agent call at the same time, recorded together (finish.ts); a chain's
      // root settles first, then its agent is called with its token. 5. Answer (answer.ts).
      const call = { requestId, paymentId: reserved.paymentId, payment: verified, requirements: priced.accepts[0]!, agent, capability, input: req.input }
      return yield* answer({
        requestId,
        async: ctx.async,
        callback: callbackUrl !== undefined,
        payment,
        work: Option.match(chain, {
          onSome: (plan) => Effect.as(settleBudget(plan, call, root), Option.none<ExecutionRow>()),
          onNone: () => finishPaid(call)
        }),
        // The row as the final transaction left it when it settled the payment; otherwise read back.
        done: (finished) => Effect.gen(function* () {
          const row = Option.isSome(finished) ? finished.value : Option.getOrThrow(yield* load(requestId))
          const settledHash = row.settlementState === "settled" ? row.settlementTxHash : null
          const view = View.forClient(row, true)
          const answered = Option.isNone(chain) ? view : { ...view, transactionId: row.transactionId, chain: yield* chain.value.info(root) }
          return { _tag: "Done", view: answered, payment: { ...payment, settlementTxHash: settledHash, receipt: receipts.issue(row) } } satisfies ExecuteOutcome
        })
      })
    }).pipe(
      sqlErrorsAsDefects,
      withSpan("Executions.execute")
    )
})
