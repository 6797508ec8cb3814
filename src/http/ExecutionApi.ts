// /api/v1/execute: paid execution (x402), its status, and retries on the original payment.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  BadGatewayResponse,
  BudgetExceededResponse,
  ChainTimeoutResponse,
  ConflictResponse,
  ForbiddenResponse,
  GatewayTimeoutResponse,
  PaymentRequiredResponse,
  UnauthorizedResponse
} from "../domain/Errors.js"
import { Accepted, ExecuteRequest, ExecutionView } from "../domain/Execution.js"
import { ExecutionReceipt } from "../domain/Receipt.js"
import { ok } from "./Envelope.js"
import { PaymentHeaderFields } from "./PaymentHeaders.js"

export const RequestIdPath = Schema.Struct({
  requestId: Schema.String.pipe(Schema.pattern(/^(req|job)_[A-Za-z0-9_-]{8,64}$/, { message: () => "must be a request id (req_…) or job id (job_…)" }))
})

export class ExecutionApi extends HttpApiGroup.make("execution")
  .add(
    HttpApiEndpoint.post("execute", "/")
      .setPayload(ExecuteRequest)
      .setUrlParams(Schema.Struct({ async: Schema.optional(Schema.Literal("true", "false")) }))
      .setHeaders(Schema.Struct({
        ...PaymentHeaderFields,
        "x-chain-token": Schema.optional(Schema.String),
        "x-chain-budget": Schema.optional(Schema.String),
        /** A metered call's unused authorisation: back on chain (default) or kept as the payer's credit. */
        "x-remainder": Schema.optional(Schema.Literal("chain", "credit")),
        /** Pay from the payer's credit: base64 JSON of a PayerCreditSpend signature (docs/clients.md "Paying with credit"). */
        "x-credit-payment": Schema.optional(Schema.String)
      }))
      .addSuccess(ok(ExecutionView))
      .addSuccess(ok(Accepted), { status: 202 })
      .addError(PaymentRequiredResponse)
      .addError(BudgetExceededResponse)
      .addError(UnauthorizedResponse)
      .addError(ForbiddenResponse)
      .addError(ChainTimeoutResponse)
      .addError(ConflictResponse)
      .addError(BadGatewayResponse)
      .addError(GatewayTimeoutResponse)
      .annotate(OpenApi.Summary, "Execute a capability (0.001 platform fee + the capability's price, via x402: PAYMENT-SIGNATURE v2 or X-PAYMENT v1)")
      .annotate(
        OpenApi.Description,
        "Checks the agent, capability, input, circuit and rate limits before payment; then holds the payment in escrow, settles it on chain and calls the agent in parallel. The output is released once the payment settled. x402 v2 payers may send the payment-identifier extension: a repeat with the same id is the same purchase (idempotencyKey), charged once. `?async=true` or a callbackUrl/webhookUrl answer 202 at once.\n\n" +
          "**Chains.** `X-Chain-Budget: <USDC>` (0.01 to 1000.00; empty or `default` = 10.00) starts a chain: the x402 price is the whole budget, settled before the agent is called; the call's own price is taken from it and the rest is the chain's budget. An agent with chaining enabled receives `X-Chain-Token` with the request and hires other agents by calling this endpoint with that header and no payment: each sub-call's price (0.001 + the callee's price) is reserved from the budget before the callee runs. Chained responses carry `transactionId` and `chain{chainId, depth, remainingBudget, childToken}` (`childToken`: a fresh 30-second token for the caller's next sub-call); a sub-call's answer also carries `chain.readHandle` (and `X-PAYMENT-USED`), its random read-back handle for GET /execute/:requestId, and the chain's payer reads any call of its chain with the root payment's header. When the root answered and no sub-call is in flight (or after 5 minutes), whatever is unspent is refunded to the payer on chain, once. Refusals: CHAIN_TOKEN_INVALID/EXPIRED 401, BUDGET_EXCEEDED 402, CHAIN_DISABLED/AGENT_NOT_CHAINABLE 403, CHAIN_NOT_FOUND 404, DEPTH_LIMIT/CIRCULAR_DEPENDENCY 400, CHAIN_TIMEOUT 408, all before anything is reserved."
      )
  )
  .add(
    HttpApiEndpoint.get("status", "/:requestId")
      .setPath(RequestIdPath)
      .setHeaders(Schema.Struct(PaymentHeaderFields))
      .addSuccess(ok(ExecutionView))
      .annotate(OpenApi.Summary, "Execution status; output and cost with the original payment header (X-PAYMENT-USED value, in X-PAYMENT or PAYMENT-SIGNATURE)")
  )
  .add(
    HttpApiEndpoint.post("retry", "/:requestId/retry")
      .setPath(RequestIdPath)
      .setHeaders(Schema.Struct(PaymentHeaderFields))
      .addSuccess(ok(ExecutionView))
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .addError(BadGatewayResponse)
      .addError(GatewayTimeoutResponse)
      .annotate(OpenApi.Summary, "Retry a failed or timed-out execution on its original payment (no new charge)")
  )
  .add(
    HttpApiEndpoint.get("receipt", "/:requestId/receipt")
      .setPath(RequestIdPath)
      .setHeaders(Schema.Struct(PaymentHeaderFields))
      .addSuccess(ok(ExecutionReceipt))
      .addError(ForbiddenResponse)
      .annotate(OpenApi.Summary, "The payer's signed receipt of a completed call, with the original payment header (X-PAYMENT-USED value)")
      .annotate(
        OpenApi.Description,
        "The same receipt the paid answer carried in its settlement response (`extensions.receipt`), signed with the service's Ed25519 key (GET /api/v1/platform/signing-key); docs/clients.md shows how to check it. 403 RECEIPT_NOT_AUTHORIZED without the payment header, 404 RECEIPT_NOT_FOUND while the call has none (pending, failed, unsettled, or paid from a chain's budget)."
      )
  )
  .prefix("/api/v1/execute") {}
