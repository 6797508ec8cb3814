// x402 over MCP (coinbase/x402 specs/transports-v2/mcp.md): the PaymentRequired object a paid tool's error result
// carries, where the payment arrives (`_meta["x402/payment"]`), and a Paywall refusal turned into that result.
import { Schema } from "effect"
import { PaymentRequirementsV2 } from "../../layers/x402/v2.js"
import type { Paywall } from "../../services/payments/Paywall.js"
import { PaymentRequired } from "../domain/Errors.js"
import { type ToolFailure, X402Challenge } from "./results.js"

/** `params._meta` key of the client's PaymentPayload. */
export const PAYMENT_META = "x402/payment"
/** Result `_meta` key of the settlement receipt (SettleResponse: success, transaction, network, payer). */
export const PAYMENT_RESPONSE_META = "x402/payment-response"

/** x402 v2 PaymentRequired, as the Paywall's `challengeV2` builds it: the structuredContent of a payment-required result. */
export const PaymentRequiredObject = Schema.Struct({
  x402Version: Schema.Literal(2),
  error: Schema.String,
  resource: Schema.Struct({ url: Schema.String, description: Schema.String, mimeType: Schema.String }),
  accepts: Schema.Array(PaymentRequirementsV2),
  extensions: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }))
}).annotations({ identifier: "X402PaymentRequired", description: "x402 v2 PaymentRequired: pay one of `accepts` and retry with the PaymentPayload in params._meta[\"x402/payment\"]" })

/** A PaymentRequired (no payment, or one refused) as x402's MCP challenge; every other failure as it is. */
export const asX402Challenge = (paywall: Paywall, options: { readonly paymentIdentifier?: boolean } = {}) => (error: ToolFailure): ToolFailure => {
  if (!(error instanceof PaymentRequired)) return error
  const required = paywall.challengeV2(error, options)
  const price = error.details["price"]
  // The Paywall's own message names the HTTP headers; over MCP the payment goes in _meta.
  const message = required.error === "payment_required" && typeof price === "string"
    ? `${required.resource.description} costs ${price} USDC: pay one of accepts with x402 and call again with the PaymentPayload in params._meta["${PAYMENT_META}"]`
    : error.message
  return new X402Challenge(required, message)
}
