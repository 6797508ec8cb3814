// Handlers of /api/v1/execute: map outcomes to 200/202 and failed executions to 502/504, and turn what the service
// returns (the payment used, its settlement, rate-limit windows) into the execution headers.
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { ClientIds } from "../../services/disputes/ClientIds.js"
import { Executions, type PaymentUse } from "../../services/executions/Executions.js"
import { BadGateway, GatewayTimeout } from "../domain/Errors.js"
import type { Accepted, ExecutionView } from "../domain/Execution.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { paymentResponseHeader, setResponseHeaders } from "./PaymentHeaders.js"

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

/**
 * The headers of an accepted payment: keep X-PAYMENT-USED to read or retry; X-PAYMENT-RESPONSE once settled; X-Client-Id
 * names the payer for disputes.
 */
const paymentHeaders = (payment: PaymentUse, clientId: string) =>
  setResponseHeaders({
    "X-PAYMENT-USED": payment.header,
    "X-Client-Id": clientId,
    ...(payment.rateLimit === null
      ? {}
      : {
        "X-RateLimit-Agent-Remaining": String(payment.rateLimit.agentRemaining),
        "X-RateLimit-Client-Remaining": String(payment.rateLimit.clientRemaining)
      }),
    ...(payment.settlementTxHash === null
      ? {}
      : { "X-PAYMENT-RESPONSE": paymentResponseHeader({ txHash: payment.settlementTxHash, network: payment.network, payer: payment.payer }) })
  })

export const ExecutionHttpLive = HttpApiBuilder.group(Api, "execution", (handlers) =>
  Effect.gen(function* () {
    const executions = yield* Executions
    const clientIds = yield* ClientIds
    return handlers
      .handle("execute", ({ headers, payload, urlParams }) =>
        executions.execute(payload, {
          paymentHeader: headers["x-payment"],
          async: urlParams.async === "true",
          chainBudget: headers["x-chain-budget"],
          chainToken: headers["x-chain-token"]
        }).pipe(
          Effect.tap((outcome) => outcome.payment === null ? Effect.void : paymentHeaders(outcome.payment, clientIds.issue(outcome.payment.payer))),
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
      .handle("retry", ({ headers, path }) =>
        executions.retry(path.requestId, headers["x-payment"]).pipe(
          Effect.tap(() => setResponseHeaders({ "X-PAYMENT-USED": (headers["x-payment"] ?? "").trim() })),
          Effect.flatMap(settle),
          Effect.tapError(retryAfter)
        ))
  }))
