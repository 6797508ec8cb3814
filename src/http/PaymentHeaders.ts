// Payment headers of paid routes, both x402 versions: the request headers they accept (X-PAYMENT v1, PAYMENT-SIGNATURE
// v2), the receipt matching the payer's version (X-PAYMENT-RESPONSE or PAYMENT-RESPONSE) and the v2 PAYMENT-REQUIRED
// challenge that a 402 carries beside its v1 JSON body.
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect, Schema } from "effect"
import { encodeHeaderJson, settleResponse } from "../../layers/x402/v2.js"
import type { Paywall } from "../../services/payments/Paywall.js"
import { PaymentRequired } from "../domain/Errors.js"

/** Header schema fields of a request that pays or proves a payment (either version; both at once is refused as a 402). */
export const PaymentHeaderFields = {
  "x-payment": Schema.optional(Schema.String),
  "payment-signature": Schema.optional(Schema.String)
}

/** Sets response headers from inside a handler (HttpApi handlers return data, not responses). */
export const setResponseHeaders = (headers: Record<string, string>) =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))

/**
 * The settlement receipt (base64 JSON `{success, transaction, network, payer}`, and for a paid call the service's
 * signed receipt under `extensions.receipt`) under the header of the payer's version: PAYMENT-RESPONSE for v2 (CAIP-2
 * network), X-PAYMENT-RESPONSE for v1 (v1 network name).
 */
export const receiptHeaders = (
  settlement: { readonly version: 1 | 2; readonly txHash: string; readonly network: string; readonly payer: string; readonly amount?: bigint | undefined },
  receipt?: unknown
) => ({
  [settlement.version === 2 ? "PAYMENT-RESPONSE" : "X-PAYMENT-RESPONSE"]: encodeHeaderJson(settleResponse(settlement, receipt))
})

/**
 * On a 402 payment challenge or refusal, the x402 v2 PAYMENT-REQUIRED header for the same quote (v2 clients read it;
 * v1 clients read the body). `paymentIdentifier`: the route honours the payment-identifier extension.
 */
export const challengeHeaders = (
  paywall: Paywall,
  options: {
    readonly paymentIdentifier?: boolean
    /** More v2 extensions for this request's challenge (e.g. `bazaar`); never fails. */
    readonly extensions?: Effect.Effect<Readonly<Record<string, unknown>>>
  } = {}
) => (error: unknown) =>
  error instanceof PaymentRequired
    ? Effect.flatMap(options.extensions ?? Effect.succeed({}), (extensions) =>
      setResponseHeaders({
        "PAYMENT-REQUIRED": encodeHeaderJson(paywall.challengeV2(error, { ...(options.paymentIdentifier === undefined ? {} : { paymentIdentifier: options.paymentIdentifier }), extensions })),
        "Cache-Control": "no-store"
      }))
    : Effect.void
