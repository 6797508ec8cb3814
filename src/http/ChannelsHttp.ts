// Handlers of /api/v1/channels: the cooperative refund (services/channels/RefundRequests.ts).
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { channelSettleResponse } from "../../layers/x402/batchSettlement/response.js"
import { BATCH_SETTLEMENT } from "../../layers/x402/batchSettlement/offer.js"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { ChannelRefundRequests, type RefundRefused } from "../../services/channels/RefundRequests.js"
import { Paywall } from "../../services/payments/Paywall.js"
import { PaymentRequired, Unavailable } from "../domain/Errors.js"
import { formatUsdc } from "../domain/Money.js"
import { Api } from "./Api.js"
import { respond } from "./Envelope.js"
import { challengeHeaders, setResponseHeaders } from "./PaymentHeaders.js"

export const ChannelsHttpLive = HttpApiBuilder.group(Api, "channels", (handlers) =>
  Effect.gen(function* () {
    const requests = yield* ChannelRefundRequests
    const paywall = yield* Paywall
    const config = { resource: "/api/v1/channels/refund", description: "Cooperative refund of a batch-settlement channel" }

    /** The 402: no `exact` offer (a refund is not bought), the channel offers of every network that has them. */
    const required = (message: string, reason: string, refused?: RefundRefused) => {
      const priced = paywall.price({ amount: 0n, resource: config.resource, description: config.description, channels: true })
      return new PaymentRequired({
        message,
        accepts: [],
        offersV2: refused?.corrective === undefined ? priced.channelOffers : priced.channelOffers.map((o) =>
          o.scheme !== BATCH_SETTLEMENT ? o : { ...o, extra: { ...o.extra, ...refused.corrective } }),
        details: { reason, ...refused?.details }
      })
    }

    return handlers.handle("refund", ({ headers }) => {
      const header = headers["payment-signature"]
      const answer = header === undefined || header.trim() === ""
        ? Effect.fail(required("send a batch-settlement refund payload in PAYMENT-SIGNATURE to get back what is left in your channel", "payment_required"))
        : requests.refund(header).pipe(
          Effect.mapError((refused) => refused.retryable === true
            ? new Unavailable({ code: "SERVICE_UNAVAILABLE", message: refused.message, details: { reason: refused.reason, retryAfterSeconds: 5 } })
            : required(refused.message, refused.reason, refused)),
          Effect.tap((done) => setResponseHeaders({
            "PAYMENT-RESPONSE": encodeHeaderJson({
              ...channelSettleResponse({ network: done.network, payer: done.payer, channelId: done.channelId, chargedAmount: 0n, chargedCumulative: done.chargedCumulative }),
              transaction: done.transaction,
              amount: done.refunded.toString()
            })
          })),
          Effect.map((done) => respond({
            channelId: done.channelId,
            network: done.network,
            transaction: done.transaction,
            refunded: formatUsdc(done.refunded),
            balanceAfter: formatUsdc(done.balanceAfter)
          }))
        )
      return answer.pipe(Effect.tapError(challengeHeaders(paywall)))
    })
  }))
