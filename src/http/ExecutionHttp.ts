// Handlers of /api/v1/execute: map outcomes to 200/202 and failed executions to 502/504, and turn what the service
// returns (the payment used, its settlement, rate-limit windows) into the execution headers.
import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect, Option, Ref } from "effect"
import { noteOnRequestLine } from "../../layers/observability/requests.js"
import { presentedFromHeaders, proofsFromHeaders } from "../../layers/x402/credential.js"
import { Agents } from "../../services/agents/Agents.js"
import { capabilityDiscovery } from "../../services/discovery/bazaar.js"
import { ClientIds } from "../../services/disputes/ClientIds.js"
import { BAZAAR } from "../../layers/x402/bazaar.js"
import { ChainCalls } from "../../services/chains/Children.js"
import { ChainRoots } from "../../services/chains/Root.js"
import { Executions } from "../../services/executions/Executions.js"
import type { PaymentUse } from "../../services/executions/outcome.js"
import { Receipts } from "../../services/executions/Receipts.js"
import type { Remaining } from "../../services/executions/RateLimits.js"
import { Paywall } from "../../services/payments/Paywall.js"
import { BadGateway, BadRequest, GatewayTimeout } from "../domain/Errors.js"
import type { Accepted, ExecuteRequest, ExecutionView } from "../domain/Execution.js"
import type { Funding } from "../domain/Funding.js"
import type { AgentId } from "../domain/Ids.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { channelSettleResponse } from "../../layers/x402/batchSettlement/response.js"
import { challengeHeaders, receiptHeaders, setResponseHeaders } from "./PaymentHeaders.js"

/** A finished attempt that failed is an error response carrying the execution (so the client can retry it). */
const settle = (view: ExecutionView): Effect.Effect<{ readonly success: true; readonly data: ExecutionView }, BadGateway | GatewayTimeout> => {
  if (view.status === "failed" || view.status === "timeout") {
    // The request line of a 502/504 says which execution failed and why (the agent's error).
    return Effect.zipRight(noteOnRequestLine({ executionId: view.requestId, cause: view.error ?? view.status }), failed(view))
  }
  return Effect.succeed(respond(view))
}

const failed = (view: ExecutionView): Effect.Effect<never, BadGateway | GatewayTimeout> => {
  if (view.status === "failed") {
    return Effect.fail(
      new BadGateway({
        code: "EXECUTION_FAILED",
        message: view.funding === "credit"
          ? "the agent failed; the price went back to your credit"
          : view.funding === "upto"
          ? "the agent failed; nothing was charged: the upto authorization was not settled (its Permit2 nonce stays unused)"
          : "the agent failed; the payment is held for a retry until details.retryUntil, then refunded",
        details: { agentError: view.error ?? "failed", ...view }
      })
    )
  }
  if (view.status === "timeout") {
    return Effect.fail(
      new GatewayTimeout({
        code: "EXECUTION_TIMEOUT",
        message: view.funding === "credit"
          ? "the agent did not answer in time; the price went back to your credit"
          : view.funding === "upto"
          ? "the agent did not answer in time; nothing was charged: the upto authorization was not settled (its Permit2 nonce stays unused)"
          : "the agent did not answer in time; the payment is held for a retry until details.retryUntil, then refunded",
        details: { ...view }
      })
    )
  }
  return Effect.dieMessage(`execution ${view.requestId} is ${view.status}, not failed`)
}

/** Errors that say when to come back carry Retry-After. */
const retryAfter = (error: unknown) => {
  const details = typeof error === "object" && error !== null && "details" in error ? error.details : undefined
  const seconds = typeof details === "object" && details !== null && "retryAfterSeconds" in details ? details.retryAfterSeconds : undefined
  return typeof seconds === "number" ? setResponseHeaders({ "Retry-After": String(seconds) }) : Effect.void
}

/**
 * The headers of an accepted payment: keep X-PAYMENT-USED to read or retry (it echoes X-PAYMENT or PAYMENT-SIGNATURE);
 * the receipt once settled, as PAYMENT-RESPONSE (x402 v2) or X-PAYMENT-RESPONSE (v1); X-Client-Id names the payer for disputes.
 */
const paymentHeaders = (payment: PaymentUse, clientId: string) =>
  setResponseHeaders({
    "X-PAYMENT-USED": payment.header,
    "X-Client-Id": clientId,
    // Paid from credit: no settlement; the signed receipt alone, base64 JSON.
    ...(payment.funding === "credit" && payment.receipt !== null ? { "X-CREDIT-RECEIPT": encodeHeaderJson(payment.receipt) } : {}),
    ...(payment.channel !== undefined
      ? { "PAYMENT-RESPONSE": encodeHeaderJson(channelSettleResponse({ network: payment.network, payer: payment.payer, ...payment.channel, receipt: payment.receipt })) }
      : payment.settlementTxHash === null
      ? {}
      : receiptHeaders({ version: payment.version, txHash: payment.settlementTxHash, network: payment.network, payer: payment.payer, amount: payment.upto?.charged }, payment.receipt))
  })

/** A sub-call's read-back handle (docs/chains.md) travels like a payment's: in X-PAYMENT-USED. */
const readHandleHeader = (view: ExecutionView) => {
  const chain: { readonly readHandle?: string | undefined } | undefined = view.chain
  return chain?.readHandle === undefined ? Effect.void : setResponseHeaders({ "X-PAYMENT-USED": chain.readHandle })
}

/**
 * X-RateLimit-* on every answer given after the windows were counted (paid or chained, success, failure or refusal such
 * as RATE_LIMITED or BUDGET_EXCEEDED); none when the request was refused before (validation, a missing payment, a bad token).
 */
const limitHeaders = (limits: Ref.Ref<Option.Option<Remaining>>) =>
  Effect.flatMap(Ref.get(limits), Option.match({
    onNone: () => Effect.void,
    onSome: (r) =>
      setResponseHeaders({ "X-RateLimit-Agent-Remaining": String(r.agentRemaining), "X-RateLimit-Client-Remaining": String(r.clientRemaining) })
  }))

export const ExecutionHttpLive = HttpApiBuilder.group(Api, "execution", (handlers) =>
  Effect.gen(function* () {
    const executions = yield* Executions
    const clientIds = yield* ClientIds
    const paywall = yield* Paywall
    const agents = yield* Agents
    const receipts = yield* Receipts
    const chainCalls = yield* ChainCalls
    const chainRoots = yield* ChainRoots
    /**
     * What pays for the call: the chain's budget (X-Chain-Token), or the x402 payment, buying a chain's whole budget
     * with X-Chain-Budget (docs/chains.md).
     */
    const fundingOf = (payload: ExecuteRequest, headers: Parameters<typeof presentedFromHeaders>[0] & { readonly "x-chain-budget"?: string | undefined; readonly "x-chain-token"?: string | undefined; readonly "x-credit-payment"?: string | undefined }, async: boolean) => {
      const budget = headers["x-chain-budget"]
      const token = headers["x-chain-token"]
      const credit = headers["x-credit-payment"]
      if (credit !== undefined) {
        // One way to pay per call: credit does not combine with an x402 payment or a chain's headers.
        const others = [["X-PAYMENT", headers["x-payment"]], ["PAYMENT-SIGNATURE", headers["payment-signature"]], ["X-Chain-Token", token], ["X-Chain-Budget", budget]]
          .filter(([, value]) => value !== undefined).map(([name]) => name)
        if (others.length > 0) {
          const message = `X-Credit-Payment pays the call from credit; it cannot go with ${others.join(", ")}`
          return Effect.fail(new BadRequest({ code: "VALIDATION_ERROR", message, details: { issues: [{ path: "X-Credit-Payment", message }] } }))
        }
        return Effect.succeed<Funding>({ _tag: "Credit", header: credit })
      }
      if (token === undefined) {
        return Effect.succeed<Funding>({ _tag: "X402", payment: presentedFromHeaders(headers), ...(budget === undefined ? {} : { budget: chainRoots.purchase(budget) }) })
      }
      if (budget !== undefined) {
        const message = "a chained call spends its chain's budget; X-Chain-Budget starts a new chain and cannot go with X-Chain-Token"
        return Effect.fail(new BadRequest({ code: "VALIDATION_ERROR", message, details: { issues: [{ path: "X-Chain-Budget", message }] } }))
      }
      return chainCalls.fund(payload, token, async)
    }
    /** The `bazaar` extension of the capability a challenge is for (x402 discovery clients catalogue it); none if unknown. */
    const bazaar = (payload: { readonly targetAgentId: AgentId; readonly capabilityId: string }) =>
      agents.get(payload.targetAgentId).pipe(
        Effect.map(({ agent }) => {
          const capability = agent.capabilities.find((c) => c.id === payload.capabilityId)
          return capability === undefined ? {} : { [BAZAAR]: capabilityDiscovery(agent.id, capability) }
        }),
        Effect.orElseSucceed(() => ({}))
      )
    return handlers
      .handle("execute", ({ headers, payload, urlParams }) =>
        Effect.flatMap(Effect.all([Ref.make(Option.none<Remaining>()), HttpServerRequest.HttpServerRequest]), ([limits, request]) => Effect.flatMap(
          fundingOf(payload, headers, urlParams.async === "true"),
          // The client's address (X-Forwarded-For only with TRUST_PROXY) is who an unpaid request's quote counts against.
          (funding) => executions.execute(payload, funding, { async: urlParams.async === "true", remainder: headers["x-remainder"], limits, client: Option.getOrElse(request.remoteAddress, () => "unknown") })
        ).pipe(
          Effect.tap((outcome) =>
            outcome.payment !== null
              ? paymentHeaders(outcome.payment, clientIds.issue(outcome.payment.payer))
              // A sub-call paid from its chain's budget: its read-back handle is what the caller keeps.
              : outcome._tag === "Done"
              ? readHandleHeader(outcome.view)
              : Effect.void),
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
          Effect.tapError(retryAfter),
          Effect.tapError(challengeHeaders(paywall, { paymentIdentifier: true, extensions: bazaar(payload) })),
          Effect.ensuring(limitHeaders(limits))
        )))
      .handle("status", ({ headers, path }) =>
        Effect.gen(function* () {
          const proofs = proofsFromHeaders(headers)
          if (proofs[0] !== undefined) yield* setResponseHeaders({ "X-PAYMENT-USED": proofs[0] })
          return respond(yield* executions.status(path.requestId, proofs))
        }))
      .handle("receipt", ({ headers, path }) =>
        Effect.gen(function* () {
          const proofs = proofsFromHeaders(headers)
          return respond(yield* receipts.read(path.requestId, proofs))
        }))
      .handle("retry", ({ headers, path }) =>
        executions.retry(path.requestId, proofsFromHeaders(headers)).pipe(
          Effect.tap(() => setResponseHeaders({ "X-PAYMENT-USED": proofsFromHeaders(headers)[0] ?? "" })),
          Effect.flatMap(settle),
          Effect.tapError(retryAfter)
        ))
  }))
