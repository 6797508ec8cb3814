// The pipeline with the payer's credit as funding (X-Credit-Payment, no on-chain payment): admit (the checks before
// payment, the price: a metered capability's maximum), fund (the signed spend verified for this call, the callback host,
// the payer's rate-limit window, an idempotent repeat), reserve (one transaction: the credit account locked and checked,
// spending limits, a settled credit payment row, the execution, the escrow held from the credit, payment.received), run
// (the agent), record (one transaction: the metered charge, the remainder back to the credit, the machine) and answer.
import { Clock, Effect, Option, type Scope } from "effect"
import { Chain } from "../../layers/Chain.js"
import { executionMachine } from "../../machines/execution.js"
import { startMachine, stepMachine } from "../../machines/step.js"
import { Conflict, PaymentRequired } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import type { CreditFunding } from "../../src/domain/Funding.js"
import { newId, newPaymentId } from "../../src/domain/Ids.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { meterOf, quoteOf } from "../../src/domain/Pricing.js"
import { Accounts } from "../ledger/Ledger.js"
import { limitRefusal, spendStatement } from "../limits/statements.js"
import { isPaymentReplay, prepaidPaymentStatement } from "../payments/Repo.js"
import { CreditRefused, CreditSpends } from "../remainders/CreditSpends.js"
import { creditAccount } from "../remainders/Repo.js"
import { batch } from "../sql/Batch.js"
import { isUniqueViolation, sqlErrorsAsDefects } from "../sql/SqlErrors.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"
import { executionStatements } from "./create.js"
import type { Timing } from "./deadline.js"
import { steppedExecution } from "./executionSpec.js"
import { meteredColumns } from "./metering.js"
import type { ExecuteContext, ExecuteOutcome, PaymentUse } from "./outcome.js"
import { requestHashOf } from "./resend.js"
import { pipelineParts } from "./pipeline.js"
import * as View from "./View.js"

export const crediting = (scope: Scope.Scope, timing: Timing) => Effect.gen(function* () {
  const { sql, config, answer, paywall, ledger, outbox, rateLimits, repo, receipts, host, agentCall, circuits, metering, quotes, check, checkCallbackHost, load } =
    yield* pipelineParts(scope, timing)
  const chain = yield* Chain
  const spends = yield* CreditSpends

  return (req: ExecuteRequest, funding: CreditFunding, ctx: ExecuteContext) =>
    Effect.gen(function* () {
      // 1. Admit: the same checks as an x402 call; a metered capability holds its maximum (a dynamic one's quote is asked
      // once the spend verified).
      const { agent, capability, callbackUrl } = yield* check(req)
      const { agentFee, price } = quoteOf(capability, "x402")
      // A refusal is the 402 challenge of this call (so the payer may pay with x402 instead), with the reason.
      const priced = paywall.price({ amount: price, resource: `${config.publicBaseUrl}/api/v1/execute`, description: `${agent.name}: ${capability.name}` })
      const refuse = (refused: CreditRefused) =>
        new PaymentRequired({
          message: refused.message,
          accepts: priced.accepts,
          details: { reason: refused.reason, price: formatUsdc(price), funding: "credit", ...refused.details }
        })

      // 2. Fund: the signed spend for this very call (agent, capability, input, at most maxAmount, before validBefore).
      const spend = yield* spends.verify(funding.header, { agentId: agent.id, capabilityId: capability.id, input: req.input, price }).pipe(Effect.mapError(refuse))
      // A dynamic capability's quote only for a payer whose credit covers the call (read, not locked: the reservation
      // checks again), under that payer's own limits: a signature from an empty wallet takes no payer's quote slot.
      const quote = meterOf(capability.pricing).unit === "micro-usdc"
        ? yield* Effect.zipRight(spends.covers(spend.payer, price).pipe(Effect.mapError(refuse)), quotes.forPayer(agent, capability, req.input, spend.payer))
        : undefined
      if (callbackUrl !== undefined) yield* checkCallbackHost(req, callbackUrl)
      const giveBack = yield* rateLimits.admit(agent.id, spend.payer, ctx.limits, "charged")
      const payment: PaymentUse = { header: funding.header.trim(), version: 2, payer: spend.payer, network: paywall.caip2, settlementTxHash: null, receipt: null, funding: "credit" }
      const requestHash = requestHashOf(req, Option.none())
      const repeat = (existing: { readonly id: string; readonly requestHash: string }) =>
        existing.requestHash !== requestHash
          ? Effect.fail(new Conflict({ code: "IDEMPOTENCY_CONFLICT", message: "this idempotencyKey was used with a different agent, capability or input", details: { requestId: existing.id } }))
          : Effect.map(load(existing.id), (row) => {
            const found = Option.getOrThrow(row)
            return { _tag: "Done", view: View.forClient(found, true), payment: { ...payment, receipt: receipts.issue(found) } } satisfies ExecuteOutcome
          })
      if (req.idempotencyKey !== undefined) {
        const existing = yield* repo.findIdempotent(spend.payer, req.idempotencyKey)
        if (Option.isSome(existing)) return yield* repeat(existing.value)
      }

      // 3. Reserve, in one transaction: the credit account locked and checked, then every row at once.
      const now = yield* Clock.currentTimeMillis
      const requestId = newId(ctx.async ? "job" : "req")
      const paymentId = newPaymentId()
      // Paid from the start: the credit is treasury money. A failure gives it back to the credit (the machine's `credit`).
      const started = startMachine(executionMachine, { retryWindowMs: timing.retryWindowMs, deadlineMs: timing.deadlineMs, startedAt: now, credit: true })
      const settled = stepMachine(executionMachine, started.persisted, { type: "PAYMENT_SETTLED", at: now })
      const rows = executionStatements(sql, {
        requestId,
        paymentId,
        payer: spend.payer,
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
        // A metered call's remainder goes back to the credit it came from.
        metered: meteredColumns(capability, quote, "credit", price)
      })
      const hold = yield* ledger.transferStatements({
        kind: "credit_spend",
        movements: [{ debit: creditAccount(spend.payer), credit: Accounts.escrow, amount: price }],
        paymentId,
        agentId: agent.id,
        subjectId: requestId
      }).pipe(Effect.orDie)
      type Reserved = { readonly _tag: "Reserved" } | ExecuteOutcome
      const reserved = yield* sql.withTransaction(Effect.gen(function* () {
        yield* spends.take(spend.payer, price)
        yield* batch(sql, [
          spendStatement(sql, { paymentId, payer: spend.payer, agentId: agent.id, amount: price, now }),
          prepaidPaymentStatement(sql, {
            purpose: "credit",
            paymentId,
            requestId,
            payer: spend.payer,
            payTo: chain.treasury.toLowerCase(),
            asset: chain.usdc.address.toLowerCase(),
            network: chain.network,
            amount: price,
            nonce: spend.storedNonce,
            validBefore: spend.validBefore,
            headerSha256: spend.headerSha256,
            now
          }),
          ...rows.statements,
          ...hold.statements,
          outbox.emitStatement("payment.received", agent.id, { paymentId, purpose: "execution", funding: "credit", requestId, agentId: agent.id, amount: formatUsdc(price), payer: spend.payer })
        ])
        return { _tag: "Reserved" } satisfies Reserved
      })).pipe(
        Effect.catchTag("CreditRefused", (refused) => Effect.fail(refuse(refused))),
        Effect.catchTag("SqlError", (error): Effect.Effect<Reserved, Conflict | PaymentRequired> => {
          const overLimit = limitRefusal(error)
          if (overLimit !== undefined) return Effect.fail(priced.refuse(overLimit))
          if (isUniqueViolation(error, "executions_idempotency") && req.idempotencyKey !== undefined) {
            return Effect.flatMap(repo.findIdempotent(spend.payer, req.idempotencyKey).pipe(Effect.orDie), (existing) =>
              Option.isSome(existing) ? repeat(existing.value) : Effect.die(error))
          }
          if (isPaymentReplay(error)) {
            return Effect.fail(refuse(new CreditRefused({ reason: "credit_payment_already_used", message: "this credit payment (its nonce) was already used; sign a new one for each call" })))
          }
          return Effect.die(error)
        }),
        Effect.tapError(() => giveBack)
      )
      if (reserved._tag !== "Reserved") return reserved

      // 4. Run and record: the agent, then one transaction with the metered charge (its remainder back to the credit)
      // and the machine's step (release, or the price back to the credit on failure).
      return yield* answer({
        requestId,
        async: ctx.async,
        callback: callbackUrl !== undefined,
        payment,
        work: Effect.gen(function* () {
          const outcome = yield* agentCall.call({ id: requestId, input: req.input }, agent, capability)
          const after = yield* UnitOfWork.transaction(sql)(Effect.gen(function* () {
            yield* metering.charge(requestId, outcome, true)
            yield* host.deliver("execution", requestId, outcome.event)
            return yield* steppedExecution(requestId)
          }))
          yield* circuits.observe(agent.id, agent.circuitState, outcome.success)
          return after
        }),
        // Read back: the metered columns and the payment's purpose are the stored row's.
        done: () => Effect.gen(function* () {
          const row = Option.getOrThrow(yield* load(requestId))
          return { _tag: "Done", view: View.forClient(row, true), payment: { ...payment, receipt: receipts.issue(row) } } satisfies ExecuteOutcome
        })
      })
    }).pipe(sqlErrorsAsDefects, Effect.withSpan("Executions.credited"))
})
