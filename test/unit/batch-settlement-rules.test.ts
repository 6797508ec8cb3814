// The pure rules of a channel payload: the channel config must be ours (receiver, authorizer, token, delay, id), and a
// voucher's cumulative ceiling must be our charged total plus the price (else the corrective answer with our state),
// within the balance and above what was claimed.
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { checkChannelConfig } from "../../layers/x402/batchSettlement/channelConfig.js"
import type { ChannelPayloadRejected } from "../../layers/x402/batchSettlement/reasons.js"
import { channelIdOf } from "../../layers/x402/batchSettlement/typedData.js"
import { checkCumulative } from "../../layers/x402/batchSettlement/voucher.js"
import { CHAIN_ID, configFor, ours, stateOf, stranger } from "../support/channelPayloads.js"

const reasonOf = <A>(result: Either.Either<A, ChannelPayloadRejected>) => (Either.isLeft(result) ? result.left.reason : "ok")

describe("checkChannelConfig", () => {
  const good = configFor("a")
  const id = channelIdOf(good, CHAIN_ID)

  it("accepts a config that names our receiver, authorizer, token and delay and hashes to its channel id", () => {
    expect(reasonOf(checkChannelConfig(good, id, ours))).toBe("ok")
    expect(reasonOf(checkChannelConfig({ ...good, receiver: good.receiver.toLowerCase() as `0x${string}` }, id, ours))).toBe("ok")
  })

  it.each([
    ["receiver", { receiver: stranger.address }, "invalid_batch_settlement_evm_receiver_mismatch"],
    ["receiver authorizer", { receiverAuthorizer: stranger.address }, "invalid_batch_settlement_evm_receiver_authorizer_mismatch"],
    ["zero receiver authorizer", { receiverAuthorizer: "0x0000000000000000000000000000000000000000" }, "invalid_batch_settlement_evm_receiver_authorizer_mismatch"],
    ["token", { token: stranger.address }, "invalid_batch_settlement_evm_token_mismatch"],
    ["longer withdrawal delay", { withdrawDelay: 1_800 }, "invalid_batch_settlement_evm_withdraw_delay_mismatch"],
    ["shorter withdrawal delay", { withdrawDelay: 899 }, "invalid_batch_settlement_evm_withdraw_delay_mismatch"]
  ] as const)("refuses another %s", (_, overrides, reason) => {
    const config = configFor("a", overrides)
    expect(reasonOf(checkChannelConfig(config, channelIdOf(config, CHAIN_ID), ours))).toBe(reason)
  })

  it("refuses a delay outside 15 minutes to 30 days even when it is the one configured", () => {
    for (const withdrawDelay of [600, 30 * 24 * 3600 + 1]) {
      const config = configFor("a", { withdrawDelay })
      expect(reasonOf(checkChannelConfig(config, channelIdOf(config, CHAIN_ID), { ...ours, withdrawDelay }))).toBe("invalid_batch_settlement_evm_withdraw_delay_out_of_range")
    }
  })

  it("refuses a config that does not hash to the claimed channel id (another salt, another chain)", () => {
    expect(reasonOf(checkChannelConfig(configFor("b"), id, ours))).toBe("invalid_batch_settlement_evm_channel_id_mismatch")
    expect(reasonOf(checkChannelConfig(good, channelIdOf(good, 8453), ours))).toBe("invalid_batch_settlement_evm_channel_id_mismatch")
  })
})

describe("checkCumulative", () => {
  const channelId = channelIdOf(configFor("a"), CHAIN_ID)
  const lastVoucher = { signedMaxClaimable: 300n, signature: "0xabcdef" as const }
  const state = stateOf({ balance: 1_000n, totalClaimed: 200n, chargedCumulative: 300n, refundNonce: 2n, withdrawRequestedAt: 0, lastVoucher })

  it("accepts charged + price and says what the voucher adds", () => {
    expect(checkCumulative({ kind: "voucher", channelId, maxClaimable: 400n, price: 100n, state })).toEqual(
      Either.right({ _tag: "Accepted", newCumulative: 400n, amount: 100n })
    )
  })

  it("answers a stale ceiling with the corrective state the scheme describes", () => {
    const outcome = checkCumulative({ kind: "voucher", channelId, maxClaimable: 250n, price: 100n, state })
    expect(outcome).toEqual(Either.right({
      _tag: "Corrective",
      reason: "invalid_batch_settlement_evm_cumulative_amount_mismatch",
      expectedMaxClaimable: 400n,
      channelState: { channelId, balance: "1000", totalClaimed: "200", withdrawRequestedAt: 0, refundNonce: "2", chargedCumulativeAmount: "300" },
      voucherState: { signedMaxClaimable: "300", signature: "0xabcdef" }
    }))
  })

  it("answers a replayed voucher (the last one accepted) with the corrective state, not a charge", () => {
    const outcome = checkCumulative({ kind: "voucher", channelId, maxClaimable: lastVoucher.signedMaxClaimable, price: 100n, state })
    expect(Either.getOrThrow(outcome)._tag).toBe("Corrective")
  })

  it("answers a ceiling above charged + price with the corrective state too (the payer signed for more than we ask)", () => {
    expect(Either.getOrThrow(checkCumulative({ kind: "voucher", channelId, maxClaimable: 500n, price: 100n, state }))._tag).toBe("Corrective")
  })

  it("omits voucherState's fields before any voucher was accepted", () => {
    const outcome = checkCumulative({ kind: "voucher", channelId, maxClaimable: 5n, price: 100n, state: stateOf() })
    expect(Either.getOrThrow(outcome)).toMatchObject({ _tag: "Corrective", voucherState: {} })
  })

  it("refuses a voucher above the channel's balance", () => {
    const low = stateOf({ balance: 350n, chargedCumulative: 300n })
    expect(reasonOf(checkCumulative({ kind: "voucher", channelId, maxClaimable: 400n, price: 100n, state: low }))).toBe("invalid_batch_settlement_evm_cumulative_exceeds_balance")
  })

  it("counts a deposit's amount in the balance its voucher is checked against", () => {
    const empty = stateOf({ balance: 0n })
    expect(reasonOf(checkCumulative({ kind: "voucher", channelId, maxClaimable: 100n, price: 100n, state: empty }))).toBe("invalid_batch_settlement_evm_channel_not_found")
    expect(reasonOf(checkCumulative({ kind: "deposit", channelId, maxClaimable: 100n, price: 100n, state: empty, depositAmount: 50n }))).toBe("invalid_batch_settlement_evm_cumulative_exceeds_balance")
    expect(reasonOf(checkCumulative({ kind: "deposit", channelId, maxClaimable: 100n, price: 100n, state: empty, depositAmount: 1_000n }))).toBe("ok")
  })

  it("refuses a ceiling not above what was already claimed (a refund's may equal it)", () => {
    const claimed = stateOf({ balance: 1_000n, totalClaimed: 400n, chargedCumulative: 300n })
    expect(reasonOf(checkCumulative({ kind: "voucher", channelId, maxClaimable: 400n, price: 100n, state: claimed }))).toBe("invalid_batch_settlement_evm_cumulative_below_claimed")
    const refund = stateOf({ balance: 1_000n, totalClaimed: 300n, chargedCumulative: 300n })
    expect(checkCumulative({ kind: "refund", channelId, maxClaimable: 300n, price: 100n, state: refund })).toEqual(Either.right({ _tag: "Accepted", newCumulative: 300n, amount: 0n }))
  })
})
