// Response headers of paid requests (x402 v1 X-PAYMENT-RESPONSE).
import { HttpApp, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"

/** Sets response headers from inside a handler (HttpApi handlers return data, not responses). */
export const setResponseHeaders = (headers: Record<string, string>) =>
  HttpApp.appendPreResponseHandler((_request, response) => Effect.succeed(HttpServerResponse.setHeaders(response, headers)))

/** base64 JSON `{success, transaction, network, payer}`, as x402 v1 clients decode it. */
export const paymentResponseHeader = (settlement: { readonly txHash: string; readonly network: string; readonly payer: string }) =>
  Buffer.from(
    JSON.stringify({ success: true, transaction: settlement.txHash, network: settlement.network, payer: settlement.payer })
  ).toString("base64")
