// Handlers of /api/v1/execute: map outcomes to 200/202 and failed executions to 502/504, with the execution headers.
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect, Option } from "effect"
import { Executions, type RequestContext } from "../../services/Executions.js"
import { BadGateway, GatewayTimeout } from "../domain/Errors.js"
import type { Accepted, ExecutionView } from "../domain/Execution.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { setResponseHeaders } from "./PaymentHeaders.js"

/** A finished attempt that failed is an error response carrying the execution (so the client can retry it). */
const settle = (view: ExecutionView): Effect.Effect<{ readonly success: true; readonly data: ExecutionView }, BadGateway | GatewayTimeout> => {
  if (view.status === "failed") {
    return Effect.fail(
      new BadGateway({
        code: "EXECUTION_FAILED",
        message: "the agent failed; the payment is held for a retry until details.retryUntil, then refunded",
        details: { agentError: view.error ?? "failed", ...view }
      })
    )
  }
  if (view.status === "timeout") {
    return Effect.fail(
      new GatewayTimeout({
        code: "EXECUTION_TIMEOUT",
        message: "the agent did not answer in time; the payment is held for a retry until details.retryUntil, then refunded",
        details: { ...view }
      })
    )
  }
  return Effect.succeed(respond(view))
}

/** Errors that say when to come back carry Retry-After. */
const retryAfter = (error: unknown) => {
  const details = typeof error === "object" && error !== null && "details" in error ? error.details : undefined
  const seconds = typeof details === "object" && details !== null && "retryAfterSeconds" in details ? details.retryAfterSeconds : undefined
  return typeof seconds === "number" ? setResponseHeaders({ "Retry-After": String(seconds) }) : Effect.void
}

const context = (request: HttpServerRequest.HttpServerRequest, paymentHeader: string | undefined, async: boolean): RequestContext => ({
  paymentHeader,
  clientAddress: Option.getOrElse(request.remoteAddress, () => "unknown"),
  async,
  setHeaders: setResponseHeaders
})

export const ExecutionHttpLive = HttpApiBuilder.group(Api, "execution", (handlers) =>
  Effect.gen(function* () {
    const executions = yield* Executions
    return handlers
      .handle("execute", ({ headers, payload, request, urlParams }) =>
        executions.execute(payload, context(request, headers["x-payment"], urlParams.async === "true")).pipe(
          Effect.flatMap((outcome): Effect.Effect<
            { readonly success: true; readonly data: ExecutionView } | { readonly success: true; readonly data: typeof Accepted.Type },
            BadGateway | GatewayTimeout
          > =>
            outcome._tag === "Accepted"
              ? Effect.succeed(
                respond({
                  ...(outcome.jobId === undefined ? {} : { jobId: outcome.jobId }),
                  requestId: outcome.requestId,
                  status: "pending" as const,
                  statusUrl: outcome.statusUrl
                })
              )
              : settle(outcome.view)
          ),
          Effect.tapError(retryAfter)
        ))
      .handle("status", ({ headers, path }) =>
        Effect.gen(function* () {
          const paymentHeader = headers["x-payment"]
          if (paymentHeader !== undefined) yield* setResponseHeaders({ "X-PAYMENT-USED": paymentHeader.trim() })
          return respond(yield* executions.status(path.requestId, paymentHeader))
        }))
      .handle("retry", ({ headers, path, request }) =>
        executions.retry(path.requestId, context(request, headers["x-payment"], false)).pipe(
          Effect.flatMap(settle),
          Effect.tapError(retryAfter)
        ))
  }))
