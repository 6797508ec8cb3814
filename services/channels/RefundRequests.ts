// A payer's cooperative refund request (x402 batch-settlement `refund` payload, as the official client's
// `refund(url)` sends it on GET /api/v1/channels/refund): the zero-charge voucher verified against our channel row
// (config ours, the payer's signature, the ceiling equal to what we charged, else the corrective 402), the amount
// within what is unclaimed, then the refund sent (Refunds.ts: what is charged is claimed first, in the same
// transaction) and its receipt awaited. The probe without payment is answered with the channel offer.
import { Data, Effect, Option } from "effect"
import type { Hex } from "viem"
import { decodeChannelPaymentSignature } from "../../layers/x402/batchSettlement/payloads.js"
import { verifyRefund } from "../../layers/x402/batchSettlement/refund.js"
import { caip2Of } from "../../layers/x402/v2.js"
import { ChannelsRepo } from "./Repo.js"
import { ChannelRefunds } from "./Refunds.js"
import { ChannelTerms } from "./Terms.js"
import { type ChannelStateExtra, correctiveAnswer, type VoucherStateExtra } from "../../layers/x402/batchSettlement/voucher.js"
import { stateOf } from "./state.js"

/** Why a refund request is refused: an x402 reason (a corrective one carries our state), or the chain's. */
export class RefundRefused extends Data.TaggedError("RefundRefused")<{
  readonly reason: string
  readonly message: string
  readonly details?: Readonly<Record<string, unknown>>
  readonly corrective?: { readonly channelState: ChannelStateExtra; readonly voucherState: VoucherStateExtra }
  /** The request could not be answered now (a claim in flight, the chain not answering): ask again. */
  readonly retryable?: boolean
}> {}

export interface RefundDone {
  readonly channelId: string
  readonly network: string
  readonly payer: string
  readonly transaction: string
  readonly refunded: bigint
  readonly balanceAfter: bigint
  readonly chargedCumulative: bigint
}

export class ChannelRefundRequests extends Effect.Service<ChannelRefundRequests>()("channels/RefundRequests", {
  effect: Effect.gen(function* () {
    const terms = yield* ChannelTerms
    const channels = yield* ChannelsRepo
    const refunds = yield* ChannelRefunds

    const refund = (header: string): Effect.Effect<RefundDone, RefundRefused> =>
      Effect.gen(function* () {
        const decoded = yield* decodeChannelPaymentSignature(header.trim()).pipe(
          Effect.mapError((e) => new RefundRefused({ reason: e.reason, message: e.message, ...(e.details === undefined ? {} : { details: e.details }) })))
        const payload = decoded.payload
        if (payload.type !== "refund") {
          return yield* new RefundRefused({ reason: "invalid_payload", message: "this route takes a batch-settlement refund payload; pay for calls on POST /api/v1/execute" })
        }
        const network = terms.all.find((t) => caip2Of(t.chainId) === decoded.accepted.network)
        if (network === undefined) return yield* new RefundRefused({ reason: "invalid_network", message: `batch-settlement is not offered on ${decoded.accepted.network}` })
        const channelId = payload.voucher.channelId.toLowerCase()
        const found = yield* Effect.orDie(channels.find(channelId))
        if (Option.isNone(found)) {
          return yield* new RefundRefused({ reason: "invalid_batch_settlement_evm_channel_not_found", message: `no channel ${channelId} with this server`, details: { channelId } })
        }
        const row = found.value
        const verified = yield* verifyRefund({ payload, state: stateOf(row), ours: network, chain: { reader: network.chain.publicClient, timeoutMs: 3_000 } }).pipe(
          Effect.mapError((e) => new RefundRefused({ reason: e.reason, message: e.message, ...(e.details === undefined ? {} : { details: e.details }) })))
        if ("_tag" in verified) {
          const answer = correctiveAnswer(channelId as Hex, stateOf(row), row.chargedCumulative)
          return yield* new RefundRefused({
            reason: answer.reason,
            message: `the refund's voucher must be over this channel's charged total, ${row.chargedCumulative}`,
            corrective: { channelState: answer.channelState, voucherState: answer.voucherState }
          })
        }
        const done = yield* refunds.refund(channelId, payload.amount === undefined ? undefined : verified.amount).pipe(
          Effect.catchTag("SqlError", Effect.die),
          Effect.mapError((e) => new RefundRefused({
            reason: e.reason === "refused" ? "invalid_batch_settlement_evm_refund_no_balance" : e.reason === "unknown_channel" ? "invalid_batch_settlement_evm_channel_not_found" : "invalid_batch_settlement_evm_rpc_read_failed",
            message: e.message,
            retryable: e.reason === "busy" || e.reason === "pending" || e.reason === "chain"
          }))
        )
        return {
          channelId,
          network: decoded.accepted.network,
          payer: row.payer,
          transaction: done.txHash,
          refunded: done.refunded,
          balanceAfter: done.channelBalanceAfter,
          chargedCumulative: row.chargedCumulative
        } satisfies RefundDone
      }).pipe(Effect.withSpan("ChannelRefundRequests.refund"))

    return { refund } as const
  }),
  dependencies: [ChannelsRepo.Default, ChannelRefunds.Default, ChannelTerms.Default]
}) {}
