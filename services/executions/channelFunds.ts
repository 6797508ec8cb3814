// A channel-paid call's funding steps (channeled.ts): the payload verified against our channel row, the
// compare-and-set charge inside the reservation, the refusals as 402s in x402's terms (the corrective one carrying our
// channel state), a re-sent header found, and what PAYMENT-RESPONSE says the call took from the channel.
import { SqlClient } from "@effect/sql"
import { Data, Effect, Option } from "effect"
import type { Hex } from "viem"
import type { ChannelPaymentPayloadV2 } from "../../layers/x402/batchSettlement/payloads.js"
import { checkChannelConfig } from "../../layers/x402/batchSettlement/channelConfig.js"
import { verifyDeposit } from "../../layers/x402/batchSettlement/deposit.js"
import type { ChannelPayloadRejected } from "../../layers/x402/batchSettlement/reasons.js"
import { type ChannelStateExtra, correctiveAnswer, verifyVoucher, type VoucherStateExtra } from "../../layers/x402/batchSettlement/voucher.js"
import { BATCH_SETTLEMENT } from "../../layers/x402/batchSettlement/offer.js"
import { PaymentRequired } from "../../src/domain/Errors.js"
import type { ExecuteRequest } from "../../src/domain/Execution.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { type ChannelRow, ChannelsRepo, type ChargeOutcome } from "../channels/Repo.js"
import { Deposits } from "../channels/Deposits.js"
import { emptyState, stateOf } from "../channels/state.js"
import type { NetworkChannelTerms } from "../channels/Terms.js"
import type { Priced } from "../payments/Paywall.js"
import type { ChannelUse, PaymentUse } from "./outcome.js"
import { ExecutionsRepo } from "./Repo.js"
import { requestHashOf } from "./resend.js"

/** How long an ERC-1271 voucher check (a smart-account payer without a payer authorizer) may take on the chain. */
const SIGNATURE_CHECK_MS = 3_000
/** How long a deposit's authorization must stay valid: for the deposit to be sent and included before it expires. */
const DEPOSIT_MIN_VALIDITY_SECONDS = 30

/** Why a channel payment is refused: an x402 reason, and for a stale cumulative our state for the payer's client. */
export class ChannelRefused extends Data.TaggedError("ChannelRefused")<{
  readonly reason: string
  readonly message: string
  readonly details?: Readonly<Record<string, unknown>>
  readonly corrective?: { readonly channelState: ChannelStateExtra; readonly voucherState: VoucherStateExtra }
}> {}

/** A verified voucher, ready to be charged. */
export interface Funded {
  readonly _tag: "Funded"
  readonly payer: string
  readonly channelId: string
  readonly voucher: { readonly maxClaimable: bigint; readonly signature: string }
  /** The channel's charged cumulative the voucher builds on (the compare-and-set's expected value). */
  readonly expected: bigint
}

const fromRejection = (r: ChannelPayloadRejected) =>
  new ChannelRefused({ reason: r.reason, message: r.message, ...(r.details === undefined ? {} : { details: r.details }) })

export class ChannelFunds extends Effect.Service<ChannelFunds>()("executions/ChannelFunds", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const channels = yield* ChannelsRepo
    const executions = yield* ExecutionsRepo
    const deposits = yield* Deposits

    /** A refusal as the call's 402: the offers, the reason, and (stale cumulative) our state in the channel offer's extra. */
    const refusing = (priced: Priced, price: bigint) => (refused: ChannelRefused) =>
      Effect.fail(new PaymentRequired({
        message: refused.message,
        accepts: priced.accepts,
        offersV2: refused.corrective === undefined ? priced.offersV2 : priced.offersV2.map((offer) =>
          offer.scheme !== BATCH_SETTLEMENT ? offer : { ...offer, extra: { ...offer.extra, ...refused.corrective } }),
        details: { reason: refused.reason, price: formatUsdc(price), funding: "channel", ...refused.details }
      }))

    const corrective = (channelId: string, row: ChannelRow, expected: bigint) => {
      const answer = correctiveAnswer(channelId as Hex, stateOf(row), expected)
      return new ChannelRefused({
        reason: answer.reason,
        message: `the voucher is not over this channel's charged total: sign ${expected} (charged ${row.chargedCumulative} + this call's price)`,
        details: { chargedCumulativeAmount: row.chargedCumulative.toString() },
        corrective: { channelState: answer.channelState, voucherState: answer.voucherState }
      })
    }

    /** The payload verified off chain against our row of its channel (a deposit is refused until deposits are taken). */
    const fund = (decoded: ChannelPaymentPayloadV2, terms: NetworkChannelTerms, price: bigint): Effect.Effect<Funded, ChannelRefused> =>
      Effect.gen(function* () {
        const payload = decoded.payload
        if (payload.type === "refund") {
          return yield* new ChannelRefused({ reason: "invalid_payload", message: "a refund is not a payment for a call: send it to GET /api/v1/channels/refund (docs/clients.md)" })
        }
        const channelId = payload.voucher.channelId.toLowerCase()
        const chain = { reader: terms.chain.publicClient, timeoutMs: SIGNATURE_CHECK_MS }
        if (payload.type === "deposit") {
          // Verified in full before anything is sent; the deposit is sent by the treasury writer and included first
          // (services/channels/Deposits.ts), then its voucher is charged like any other.
          const found = yield* Effect.orDie(channels.find(channelId))
          const state = Option.match(found, { onNone: () => emptyState, onSome: stateOf })
          const verified = yield* verifyDeposit({
            payload, price, state, ours: terms, tokenDomain: terms.chain.usdc, chain, now: Math.floor(Date.now() / 1000), minValiditySeconds: DEPOSIT_MIN_VALIDITY_SECONDS
          }).pipe(Effect.mapError(fromRejection))
          const voucher = verified.voucher
          if (voucher._tag === "Corrective") {
            return yield* Option.match(found, {
              onNone: () => Effect.fail(new ChannelRefused({ reason: voucher.reason, message: `a new channel's first voucher is over this call's price: sign ${price}` })),
              onSome: (row) => Effect.fail(corrective(channelId, row, state.chargedCumulative + price))
            })
          }
          yield* deposits.deposit({ terms, config: payload.channelConfig, channelId: payload.voucher.channelId, authorization: verified.deposit }).pipe(
            Effect.catchTag("SqlError", Effect.die),
            Effect.mapError((refused) => new ChannelRefused({ reason: refused.reason, message: refused.message, details: { ...refused.details, retryable: refused.retryable } }))
          )
          return {
            _tag: "Funded",
            payer: payload.channelConfig.payer.toLowerCase(),
            channelId,
            voucher: { maxClaimable: voucher.signedMaxClaimable, signature: voucher.signature },
            expected: state.chargedCumulative
          } satisfies Funded
        }
        // Ours first (receiver, authorizer, token, delay): a foreign channel is refused for what it is.
        yield* checkChannelConfig(payload.channelConfig, payload.voucher.channelId, terms).pipe(Effect.mapError(fromRejection))
        const found = yield* Effect.orDie(channels.find(channelId))
        if (Option.isNone(found)) {
          return yield* new ChannelRefused({ reason: "invalid_batch_settlement_evm_channel_not_found", message: `no open channel ${channelId} with this server: deposit first`, details: { channelId } })
        }
        const row = found.value
        const outcome = yield* verifyVoucher({ kind: "voucher", config: payload.channelConfig, voucher: payload.voucher, price, state: stateOf(row), ours: terms, chain }).pipe(Effect.mapError(fromRejection))
        if (outcome._tag === "Corrective") return yield* corrective(channelId, row, outcome.expectedMaxClaimable)
        return {
          _tag: "Funded",
          payer: payload.channelConfig.payer.toLowerCase(),
          channelId,
          voucher: { maxClaimable: outcome.signedMaxClaimable, signature: outcome.signature },
          expected: row.chargedCumulative
        } satisfies Funded
      })

    /** Inside the reservation's transaction: the compare-and-set charge, or the refusal (which rolls the transaction back). */
    const charge = (funded: Funded, requestId: string, price: bigint) =>
      Effect.gen(function* () {
        const outcome: ChargeOutcome = yield* channels.charge({
          channelId: funded.channelId,
          requestId,
          amount: price,
          voucher: funded.voucher,
          expectedCumulative: funded.expected
        })
        if (outcome.outcome === "charged") return outcome
        const row = Option.getOrThrow(yield* channels.find(funded.channelId))
        switch (outcome.outcome) {
          case "stale":
          case "voucher_short":
            return yield* corrective(funded.channelId, row, row.chargedCumulative + price)
          case "over_balance":
            return yield* new ChannelRefused({ reason: "invalid_batch_settlement_evm_cumulative_exceeds_balance", message: "the channel's balance does not cover this call: top it up", details: { balance: row.balance.toString() } })
          case "not_open":
            return yield* new ChannelRefused({ reason: "invalid_batch_settlement_evm_channel_not_found", message: `the channel is ${row.status}: it takes no new charges`, details: { status: row.status } })
          default:
            return yield* Effect.dieMessage(`channel charge of a new request answered ${outcome.outcome}`)
        }
      })

    /** What PAYMENT-RESPONSE says before the call is over (an async call's 202): the whole price, as charged. */
    const useOf = (funded: Funded, price: bigint, charged: ChargeOutcome): ChannelUse => ({
      channelId: funded.channelId,
      chargedAmount: price,
      chargedCumulative: charged.chargedCumulative ?? funded.expected + price
    })

    /** The call's charge as it stands (kept, part of it, or given back), for the answer. */
    const chargeOf = (requestId: string, payment: PaymentUse) =>
      Effect.gen(function* () {
        const [row] = yield* sql<{ readonly channelId: string; readonly amount: string; readonly cumulativeAfter: string; readonly status: string; readonly keptAmount: string | null }>`
          SELECT channel_id, amount::text, cumulative_after::text, status, kept_amount::text FROM channel_charges WHERE request_id = ${requestId}`
        if (row === undefined) return payment
        const amount = BigInt(row.amount)
        const charged = row.status === "returned" ? 0n : row.keptAmount === null ? amount : BigInt(row.keptAmount)
        const base = BigInt(row.cumulativeAfter) - amount
        return { ...payment, channel: { channelId: row.channelId, chargedAmount: charged, chargedCumulative: base + charged } } satisfies PaymentUse
      }).pipe(Effect.orDie)

    /** The call a channel header already paid for, when this request is that call's (agent, capability, input, key). */
    const resent = (headerSha256: string, req: ExecuteRequest) =>
      Effect.gen(function* () {
        // The latest call the header paid that kept its charge (a failed call gave it back: the header may pay again).
        const [paid] = yield* sql<{ readonly subjectId: string }>`
          SELECT p.subject_id FROM payments p JOIN executions e ON e.id = p.subject_id
          WHERE p.header_sha256 = ${headerSha256} AND p.purpose = 'channel' AND e.status IN ('pending', 'completed')
          ORDER BY p.created_at DESC LIMIT 1`
        if (paid === undefined) return Option.none<string>()
        const row = yield* executions.find(paid.subjectId)
        return Option.isSome(row) && row.value.requestHash === requestHashOf(req, Option.none()) && (row.value.idempotencyKey ?? undefined) === req.idempotencyKey
          ? Option.some(row.value.id)
          : Option.none<string>()
      }).pipe(Effect.orDie)

    return { refusing, fund, charge, useOf, chargeOf, resent } as const
  }),
  dependencies: [ChannelsRepo.Default, ExecutionsRepo.Default, Deposits.Default]
}) {}
