// The pipeline with an x402 `upto` authorization as funding (a metered capability's maximum through Permit2 and the
// x402UptoPermit2Proxy): admit (the checks before payment; metered capabilities only), fund (the authorization
// verified against our terms and the chain before the agent runs: uptoFunds.ts), reserve (one statement: limits, the
// payment row of the maximum, the execution, the escrow held from settlement receivable, payment.received, the
// rate-limit windows), run (the agent), record (one transaction: the metered charge, the machine, and the payment's
// charge, or the payment voided when the call failed), settle (exactly the charge, one transaction through the treasury
// writer: services/payments/UptoSettlements.ts) and answer, as x402's own server does: verify → work → settle → answer.
import { Clock, Effect, Option, type Scope } from "effect"
import { withSpan } from "../../layers/observability/span.js"
import type { PaymentCredential } from "../../layers/x402/credential.js"
import { PaymentRejected, sha256 } from "../../layers/x402/payment.js"
import { nonceKey } from "../../layers/x402/upto/payload.js"
import { executionMachine } from "../../machines/execution.js"
import { startMachine } from "../../machines/step.js"
import { Conflict, type PaymentRequired, type RateLimited } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import { newId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { isMetered, meterOf, quoteOf } from "../../src/domain/Pricing.js"
import { Accounts } from "../ledger/Ledger.js"
import { limitRefusal, spendStatement } from "../limits/statements.js"
import { chargeStatement, uptoPaymentStatements } from "../payments/uptoRepo.js"
import { UptoSettlements } from "../payments/UptoSettlements.js"
import { unsettledRefusal } from "../payments/unsettled.js"
import { isPaymentReplay } from "../payments/Repo.js"
import { batch } from "../sql/Batch.js"
import { isUniqueViolation, sqlErrorsAsDefects } from "../sql/SqlErrors.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { executionStatements } from "./create.js"
import type { Timing } from "./deadline.js"
import { steppedExecution } from "./executionSpec.js"
import { meteredColumns } from "./metering.js"
import type { ExecuteContext, ExecuteOutcome, PaymentUse } from "./outcome.js"
import { requestHashOf } from "./resend.js"
import { UptoFunds } from "./uptoFunds.js"
import { pipelineParts } from "./pipeline.js"
import * as View from "./View.js"

export const uptoPaying = (scope: Scope.Scope, timing: Timing) => Effect.gen(function* () {
  const { sql, config, answer, paywall, ledger, outbox, rateLimits, repo, receipts, host, agentCall, circuits, metering, quotes, check, checkCallbackHost, load } =
    yield* pipelineParts(scope, timing)
  const funds = yield* UptoFunds
  const settlements = yield* UptoSettlements

  /**
   * The call as it stands, for its payer: the view, and what settled (the charge, its transaction) once it did. A
   * completed call whose settlement failed is answered as x402 answers a failed settlement: 402, no output, nothing
   * charged (docs/settlement.md "Upto").
   */
  const answered = (requestId: string, payment: PaymentUse, refuse: (r: PaymentRejected) => PaymentRequired) =>
    Effect.gen(function* () {
      const row = Option.getOrThrow(yield* load(requestId))
      if (row.status === "completed" && row.settlementState === "failed") {
        return yield* Effect.fail(refuse(new PaymentRejected({
          reason: "settlement_failed",
          message: "the call completed but its upto settlement failed (the payer's USDC or Permit2 allowance moved since verification): its output is not released and nothing was charged",
          details: { requestId }
        })))
      }
      const settled = row.settlementState === "settled"
      const charged = row.status === "completed" && settled ? row.price : 0n
      return {
        _tag: "Done",
        view: View.forClient(row, true),
        payment: { ...payment, payer: row.payer, settlementTxHash: settled ? row.settlementTxHash : null, upto: { maximum: row.authorized ?? row.price, charged }, receipt: receipts.issue(row) }
      } satisfies ExecuteOutcome
    })

  return (req: ExecuteRequest, credential: PaymentCredential, ctx: ExecuteContext) =>
    Effect.gen(function* () {
      // 1. Admit: the checks every paid call makes; upto authorizes a metered capability's maximum.
      const { agent, capability, callbackUrl } = yield* check(req)
      const { agentFee, price } = quoteOf(capability, "x402")
      const metered = isMetered(capability.pricing)
      const priced = paywall.price({
        amount: price,
        resource: `${config.publicBaseUrl}/api/v1/execute`,
        description: `${agent.name}: ${capability.name}`,
        channels: true,
        upto: metered
      })
      if (!metered) {
        return yield* Effect.fail(priced.refuse(new PaymentRejected({ reason: "unsupported_scheme", message: "upto pays for metered capabilities only: pay this one with exact (or batch-settlement)" })))
      }

      // 2. Fund: a re-sent header answers its own call; a new one is verified before anything is reserved.
      const raw = credential.raw.trim()
      const headerSha256 = sha256(raw)
      const decoded = yield* funds.decode(raw).pipe(Effect.mapError(priced.refuse))
      const payment: PaymentUse = { header: raw, version: 2, payer: "", network: decoded.accepted.network, settlementTxHash: null, receipt: null, funding: "upto" }
      const again = yield* funds.resent(headerSha256, req)
      if (Option.isSome(again)) {
        if (again.value._tag === "Same") return yield* answered(again.value.requestId, payment, priced.refuse)
        return yield* Effect.fail(priced.refuse(new PaymentRejected({ reason: "payment_already_used", message: "this upto authorization already paid another call" })))
      }
      const now = yield* Clock.currentTimeMillis
      const { verified, terms } = yield* funds.fund(decoded, price, Math.floor(now / 1000)).pipe(Effect.mapError(priced.refuse))
      const payer = verified.payer.toLowerCase()
      const paying: PaymentUse = { ...payment, payer }

      const quote = meterOf(capability.pricing).unit === "micro-usdc" ? yield* quotes.forPayer(agent, capability, req.input, payer) : undefined
      if (callbackUrl !== undefined) yield* checkCallbackHost(req, callbackUrl)
      // Rate limits: a new call counts its windows in the reservation's statement (step 3); a repeat of an idempotent
      // request here, and gives them back (it is no new call).
      const repeatWindows = Effect.flatMap(rateLimits.admit(agent.id, payer, ctx.limits, "charged"), (giveBack) => giveBack)
      const requestHash = requestHashOf(req, Option.none())
      const repeat = (existing: { readonly id: string; readonly requestHash: string }): Effect.Effect<ExecuteOutcome, Conflict | PaymentRequired> =>
        existing.requestHash !== requestHash
          ? Effect.fail(new Conflict({ code: "IDEMPOTENCY_CONFLICT", message: "this idempotencyKey was used with a different agent, capability or input", details: { requestId: existing.id } }))
          : answered(existing.id, paying, priced.refuse)
      if (req.idempotencyKey !== undefined) {
        const existing = yield* repo.findIdempotent(payer, req.idempotencyKey)
        if (Option.isSome(existing)) return yield* Effect.zipRight(repeatWindows, repeat(existing.value))
      }

      // 3. Reserve, as one statement: the payment of the maximum (refused if the payer's balance does not cover it beside
      // its unsettled payments, or if this Permit2 nonce was used by another of our payments), every row at once.
      const requestId = newId(ctx.async ? "job" : "req")
      const reservation = uptoPaymentStatements(sql, {
        payer: verified.payer,
        payTo: terms.receiver,
        asset: terms.token,
        network: terms.network,
        maximum: price,
        permitted: verified.permitted,
        nonce: nonceKey(verified.nonce.toString()),
        deadline: verified.deadline,
        validAfter: verified.validAfter,
        signature: verified.signature,
        headerSha256,
        balance: verified.balance
      }, requestId, now)
      const paymentId = reservation.id
      const start = startMachine(executionMachine, { retryWindowMs: timing.retryWindowMs, deadlineMs: timing.deadlineMs, startedAt: now })
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
        start,
        now,
        metered: meteredColumns(capability, quote, "upto", price)
      })
      // Held in escrow from the moment it is accepted, backed by the settlement it is owed (as for `exact`).
      const hold = yield* ledger.transferStatements({
        kind: "escrow_hold",
        movements: [{ debit: Accounts.settlementReceivable, credit: Accounts.escrow, amount: price }],
        paymentId,
        agentId: agent.id,
        subjectId: requestId
      }).pipe(Effect.orDie)
      const reserved = yield* batch(sql, [
        spendStatement(sql, { paymentId, payer, agentId: agent.id, amount: price, now }),
        ...reservation.statements,
        ...rows.statements,
        ...hold.statements,
        outbox.emitStatement("payment.received", agent.id, {
          paymentId,
          purpose: "execution",
          funding: "upto",
          requestId,
          agentId: agent.id,
          amount: formatUsdc(price),
          payer
        }),
        rateLimits.countStatement(agent.id, payer, now)
      ]).pipe(
        Effect.tap((counts) => rateLimits.counted(counts, ctx.limits)),
        Effect.as(true as const),
        Effect.catchTag("SqlError", (error): Effect.Effect<ExecuteOutcome, PaymentRequired | RateLimited | Conflict> => {
          const overRate = rateLimits.refusal(error, now, ctx.limits, "charged")
          if (overRate !== undefined) return overRate
          const refusal = limitRefusal(error) ?? unsettledRefusal(error)
          if (refusal !== undefined) return Effect.fail(priced.refuse(refusal))
          if (isUniqueViolation(error, "executions_idempotency") && req.idempotencyKey !== undefined) {
            return Effect.flatMap(repo.findIdempotent(payer, req.idempotencyKey).pipe(Effect.orDie), (existing) =>
              Option.isSome(existing) ? Effect.zipRight(repeatWindows, repeat(existing.value)) : Effect.die(error))
          }
          // The same header raced itself (it answers the other request's call), or the nonce paid another of our payments.
          if (isPaymentReplay(error)) {
            return Effect.flatMap(funds.resent(headerSha256, req), (found) =>
              Option.isSome(found) && found.value._tag === "Same"
                ? answered(found.value.requestId, paying, priced.refuse)
                : Effect.fail(priced.refuse(new PaymentRejected({ reason: "payment_already_used", message: "this upto authorization (its Permit2 nonce) was already used" }))))
          }
          return Effect.die(error)
        })
      )
      if (reserved !== true) return reserved

      // 4. Run and record: the agent, then one transaction with the metered charge, the machine's step and the payment's
      // charge (or the payment voided: a failed call settles nothing). 5. Settle exactly the charge, then answer.
      return yield* answer({
        requestId,
        async: ctx.async,
        callback: callbackUrl !== undefined,
        payment: { ...paying, upto: { maximum: price, charged: 0n } },
        work: Effect.gen(function* () {
          const outcome = yield* agentCall.call({ id: requestId, input: req.input }, agent, capability)
          const after = yield* UnitOfWork.transaction(sql)(Effect.gen(function* () {
            yield* metering.charge(requestId, outcome, false)
            yield* host.deliver("execution", requestId, outcome.event)
            const row = yield* steppedExecution(requestId)
            const completed = Option.isSome(row) && row.value.status === "completed"
            if (completed) yield* chargeStatement(sql, paymentId, row.value.price)
            else yield* settlements.voidUnused(paymentId)
            return completed
          }))
          yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
          if (after) yield* settlements.settle(paymentId)
          return Option.none()
        }),
        done: () => answered(requestId, paying, priced.refuse)
      })
    }).pipe(sqlErrorsAsDefects, withSpan("Executions.upto"))
})
