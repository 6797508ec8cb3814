// A paid execution sent again with the very same payment header (a client that lost the answer): the purchase that
// header already made, answered from its row (result or current status), never reserved or charged again. Looked up
// only once the way to a new reservation failed (paid.ts): a refused verification, a failed check, or the
// reservation's unique violation on the header.
import { Effect, Either, Option } from "effect"
import { AppConfig } from "../../layers/Config.js"
import { type PresentedPayment, paymentIdentifierOfCredential } from "../../layers/x402/credential.js"
import { PaymentRejected, sha256 } from "../../layers/x402/payment.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import type { X402Funding } from "../../src/domain/Funding.js"
import { Payments } from "../payments/Payments.js"
import { Paywall } from "../payments/Paywall.js"
import { canonical, idempotencyKeyOf } from "./create.js"
import type { ExecuteOutcome } from "./outcome.js"
import { Receipts } from "./Receipts.js"
import { ExecutionsRepo } from "./Repo.js"
import * as View from "./View.js"
import { withSpan } from "../../layers/observability/span.js"

/** What binds a request to its purchase: agent, capability, input (and a chain root's budget), hashed canonically. */
export const requestHashOf = (req: ExecuteRequest, chainBudget: Option.Option<bigint>) =>
  sha256(canonical({
    targetAgentId: req.targetAgentId,
    capabilityId: req.capabilityId,
    input: req.input,
    ...Option.match(chainBudget, { onNone: () => ({}), onSome: (budget) => ({ chainBudget: budget.toString() }) })
  }))

export const resending = Effect.gen(function* () {
  const payments = yield* Payments
  const paywall = yield* Paywall
  const repo = yield* ExecutionsRepo
  const receipts = yield* Receipts
  const { publicBaseUrl } = yield* AppConfig

  /**
   * Some(answer) when `presented` is the exact header text of an execution's payment and the request is that
   * execution's: same agent, capability, input, chain budget and idempotency key (the body's, or the header's x402
   * payment-identifier). Holding the header is the proof, as for GET /execute/:id, so the output is shown.
   * None otherwise: the ordinary path then verifies the payment and refuses it as already used (a used header with
   * another body or key gets no free call and learns nothing of the first one).
   */
  return (req: ExecuteRequest, funding: X402Funding) =>
    Effect.gen(function* () {
      const presented: PresentedPayment = funding.payment
      if (presented === undefined || presented instanceof PaymentRejected) return Option.none<ExecuteOutcome>()
      const prior = yield* payments.madeWith(presented)
      if (Option.isNone(prior) || prior.value.purpose !== "execution") return Option.none<ExecuteOutcome>()
      const found = yield* repo.find(prior.value.subjectId).pipe(Effect.orDie)
      const budget = funding.budget === undefined ? Either.right(Option.none<bigint>()) : Either.map(funding.budget.requested, Option.some)
      const identifier = yield* Effect.either(paymentIdentifierOfCredential(presented))
      if (Option.isNone(found) || Either.isLeft(budget) || Either.isLeft(identifier)) return Option.none<ExecuteOutcome>()
      const row = found.value
      const key = idempotencyKeyOf(req.idempotencyKey, identifier.right)
      if (row.requestHash !== requestHashOf(req, budget.right) || (row.idempotencyKey ?? undefined) !== key) {
        return Option.none<ExecuteOutcome>()
      }
      const payment = {
        header: presented.raw.trim(),
        version: presented.version,
        payer: row.payer,
        network: presented.version === 2 ? paywall.caip2 : paywall.network,
        settlementTxHash: row.settlementState === "settled" ? row.settlementTxHash : null,
        receipt: receipts.issue(row)
      }
      if (row.status === "pending" && row.mode !== "sync") {
        const statusUrl = `${publicBaseUrl}/api/v1/execute/${row.id}`
        const jobId = row.mode === "async" && row.id.startsWith("job_") ? row.id : undefined
        return Option.some<ExecuteOutcome>({ _tag: "Accepted", requestId: row.id, jobId, statusUrl, payment })
      }
      return Option.some<ExecuteOutcome>({ _tag: "Done", view: View.forClient(row, true), payment })
    }).pipe(withSpan("Executions.resend"))
})
