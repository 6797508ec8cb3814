// /api/v1/execute: paid execution (x402), its status, and retries on the original payment.
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  BadGatewayResponse,
  ConflictResponse,
  ForbiddenResponse,
  GatewayTimeoutResponse,
  PaymentRequiredResponse
} from "../domain/Errors.js"
import { Accepted, ExecuteRequest, ExecutionView } from "../domain/Execution.js"
import { ok } from "./Envelope.js"

const RequestIdPath = Schema.Struct({
  requestId: Schema.String.pipe(Schema.pattern(/^(req|job)_[A-Za-z0-9_-]{8,64}$/, { message: () => "must be a request id (req_…) or job id (job_…)" }))
})

export class ExecutionApi extends HttpApiGroup.make("execution")
  .add(
    HttpApiEndpoint.post("execute", "/")
      .setPayload(ExecuteRequest)
      .setUrlParams(Schema.Struct({ async: Schema.optional(Schema.Literal("true", "false")) }))
      .setHeaders(Schema.Struct({ "x-payment": Schema.optional(Schema.String), "x-chain-token": Schema.optional(Schema.String) }))
      .addSuccess(ok(ExecutionView))
      .addSuccess(ok(Accepted), { status: 202 })
      .addError(PaymentRequiredResponse)
      .addError(ConflictResponse)
      .addError(BadGatewayResponse)
      .addError(GatewayTimeoutResponse)
      .annotate(OpenApi.Summary, "Execute a capability (0.001 platform fee + the capability's price, via X-PAYMENT)")
      .annotate(
        OpenApi.Description,
        "Checks the agent, capability, input, circuit and rate limits before payment; then holds the payment in escrow, settles it on chain and calls the agent in parallel. The output is released once the payment settled. `?async=true` or a callbackUrl/webhookUrl answer 202 at once."
      )
  )
  .add(
    HttpApiEndpoint.get("status", "/:requestId")
      .setPath(RequestIdPath)
      .setHeaders(Schema.Struct({ "x-payment": Schema.optional(Schema.String) }))
      .addSuccess(ok(ExecutionView))
      .annotate(OpenApi.Summary, "Execution status; output and cost with the original X-PAYMENT header")
  )
  .add(
    HttpApiEndpoint.post("retry", "/:requestId/retry")
      .setPath(RequestIdPath)
      .setHeaders(Schema.Struct({ "x-payment": Schema.optional(Schema.String) }))
      .addSuccess(ok(ExecutionView))
      .addError(ForbiddenResponse)
      .addError(ConflictResponse)
      .addError(BadGatewayResponse)
      .addError(GatewayTimeoutResponse)
      .annotate(OpenApi.Summary, "Retry a failed or timed-out execution on its original payment (no new charge)")
  )
  .prefix("/api/v1/execute") {}
