// /api/v1/channels: what a batch-settlement payer does beside paying for calls: the cooperative refund of what is left
// in its channel (the official client's `refund(url)`: a GET probe for the 402's channel offer, then the same GET with a
// `refund` payload in PAYMENT-SIGNATURE).
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { PaymentRequiredResponse, UnavailableResponse } from "../domain/Errors.js"
import { ok } from "./Envelope.js"
import { PaymentHeaderFields } from "./PaymentHeaders.js"

export const ChannelRefund = Schema.Struct({
  channelId: Schema.String,
  network: Schema.String,
  /** The refund's transaction on chain (mined). */
  transaction: Schema.String,
  /** What went back to the payer, in USDC. */
  refunded: Schema.String,
  /** What stays in the channel (charged and claimed, not the payer's any more), in USDC. */
  balanceAfter: Schema.String
}).annotations({ identifier: "ChannelRefund" })

export class ChannelsApi extends HttpApiGroup.make("channels")
  .add(
    HttpApiEndpoint.get("refund", "/refund")
      .setHeaders(Schema.Struct(PaymentHeaderFields))
      .addSuccess(ok(ChannelRefund))
      .addError(PaymentRequiredResponse)
      .addError(UnavailableResponse)
      .annotate(OpenApi.Summary, "Cooperative refund of a batch-settlement channel (x402 v2 `refund` payload in PAYMENT-SIGNATURE)")
      .annotate(
        OpenApi.Description,
        "Without a payment: 402 whose PAYMENT-REQUIRED offers the channel terms (scheme batch-settlement), which is what the official client's `refund(url)` probes for. With a `refund` payload (a zero-charge voucher over the channel's charged total, and optionally an amount): what is charged is claimed and the rest (or the amount) goes back to the payer in one transaction; the answer waits for it to be mined and carries PAYMENT-RESPONSE. A voucher over another total gets the corrective 402 with the channel's state."
      )
  )
  .prefix("/api/v1/channels") {}
