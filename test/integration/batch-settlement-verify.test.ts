// Our off-chain checks of channel payloads against x402BatchSettlement on the devnet: the channel id and the voucher
// digest are the contract's own (`getChannelId`, `getVoucherDigest`), a deposit the official @x402/evm client signed
// verifies and then lands on chain with the ERC-3009 nonce we bound it to, and the vouchers that follow are accepted,
// or answered with the corrective state, against the balance the contract reports.
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { BATCH_SETTLEMENT_ADDRESS } from "@x402/evm"
import { signVoucher } from "@x402/evm/batch-settlement/client"
import { Effect } from "effect"
import { usdcAbi } from "../../layers/devnet/usdcAbi.js"
import type { OurChannelTerms } from "../../layers/x402/batchSettlement/channelConfig.js"
import { verifyDeposit } from "../../layers/x402/batchSettlement/deposit.js"
import { decodeChannelPaymentSignature, type DepositPayload, type VoucherPayload } from "../../layers/x402/batchSettlement/payloads.js"
import { channelIdOf, depositNonceOf, voucherDigest } from "../../layers/x402/batchSettlement/typedData.js"
import { type ChainCheck, verifyVoucher } from "../../layers/x402/batchSettlement/voucher.js"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { type ChannelChain, NETWORK, startChannelChain, WITHDRAW_DELAY } from "../support/channelChain.js"
import { officialBatchSettlementAbi } from "../support/x402Official.js"

let c: ChannelChain
let ours: OurChannelTerms
let chain: ChainCheck
beforeAll(async () => {
  c = await startChannelChain()
  ours = { chainId: c.devnet.chainId, receiver: c.receiver.address, receiverAuthorizer: c.receiverAuthorizer.address, token: c.usdc, withdrawDelay: WITHDRAW_DELAY }
  chain = { reader: c.publicClient, timeoutMs: 5_000 }
}, 60_000)
afterAll(() => c?.devnet.stop())

/** What the payer's client puts in PAYMENT-SIGNATURE, decoded by us. */
const throughHeader = (payload: unknown) =>
  decodeChannelPaymentSignature(encodeHeaderJson({ x402Version: 2, accepted: c.requirements, payload })).pipe(Effect.map((d) => d.payload))

/** The contract's `channels(channelId)`: balance and totalClaimed. */
const onChainState = async (channelId: `0x${string}`) => {
  const { balance, totalClaimed } = await c.channelState(channelId)
  if (balance === undefined || totalClaimed === undefined) throw new Error("channels() returned no balance")
  return { balance, totalClaimed }
}

const asDeposit = (p: DepositPayload | VoucherPayload | { readonly type: "refund" }): DepositPayload => {
  if (p.type !== "deposit") throw new Error(`expected a deposit, got ${p.type}`)
  return p
}
const asVoucher = (p: DepositPayload | VoucherPayload | { readonly type: "refund" }): VoucherPayload => {
  if (p.type !== "voucher") throw new Error(`expected a voucher, got ${p.type}`)
  return p
}

describe("channel payloads against the devnet's x402BatchSettlement", () => {
  it.effect("computes the contract's channel id and voucher digest", () =>
    Effect.gen(function* () {
      for (const config of [c.configFor("id one"), { ...c.configFor("id two"), withdrawDelay: 86_400, payerAuthorizer: "0x0000000000000000000000000000000000000000" as const }]) {
        const channelId = channelIdOf(config, ours.chainId)
        expect(yield* Effect.promise(() => c.read("getChannelId", [config]))).toBe(channelId)
        for (const amount of [0n, 1n, 123_456_789n, (1n << 128n) - 1n]) {
          expect(yield* Effect.promise(() => c.read("getVoucherDigest", [channelId, amount]))).toBe(voucherDigest(ours.chainId, channelId, amount))
        }
      }
    }))

  it.effect("verifies the official client's deposit, which then lands with the nonce we bound it to; its vouchers follow", () =>
    Effect.gen(function* () {
      const config = c.configFor("verified deposit")
      const channelId = channelIdOf(config, ours.chainId)
      const { payload: official, collectorData } = yield* Effect.promise(() => c.depositPayload(config, 1_000n))
      const payload = asDeposit(yield* throughHeader(official))
      const onChain = yield* Effect.promise(() => onChainState(channelId))
      const empty = { ...onChain, chargedCumulative: onChain.totalClaimed, withdrawRequestedAt: 0, refundNonce: 0n }
      const verified = yield* verifyDeposit({
        payload, price: 100n, state: empty, ours, tokenDomain: { name: "USDC", version: "2" }, chain,
        now: Math.floor(Date.now() / 1000), minValiditySeconds: 60
      })
      expect(verified.voucher).toMatchObject({ _tag: "Accepted", newCumulative: 100n, amount: 100n })
      expect(verified.deposit.nonce).toBe(depositNonceOf(channelId, verified.deposit.salt))

      const nonceUsed = () => c.publicClient.readContract({ address: c.usdc, abi: usdcAbi, functionName: "authorizationState", args: [c.payer.address, verified.deposit.nonce] })
      expect(yield* Effect.promise(nonceUsed)).toBe(false)
      yield* Effect.promise(() => c.deposit(config, 1_000n, collectorData))
      expect(yield* Effect.promise(nonceUsed)).toBe(true)
      const funded = yield* Effect.promise(() => onChainState(channelId))
      expect(funded).toEqual({ balance: 1_000n, totalClaimed: 0n })

      const state = {
        ...funded, chargedCumulative: 100n, withdrawRequestedAt: 0, refundNonce: 0n,
        lastVoucher: { signedMaxClaimable: 100n, signature: payload.voucher.signature }
      }
      const voucherAt = (max: bigint) =>
        Effect.promise(() => signVoucher(c.payer, channelId, max.toString(), NETWORK)).pipe(
          Effect.flatMap((voucher) => throughHeader({ type: "voucher", channelConfig: config, voucher })),
          Effect.map(asVoucher)
        )
      const verify = (p: VoucherPayload) => verifyVoucher({ kind: "voucher", config: p.channelConfig, voucher: p.voucher, price: 100n, state, ours, chain })

      const accepted = yield* verify(yield* voucherAt(200n))
      if (accepted._tag !== "Accepted") throw new Error("expected the voucher to be accepted")
      expect(accepted).toMatchObject({ newCumulative: 200n, amount: 100n })
      // What we accepted, the contract takes: the voucher claimed on chain with our receiver authorizer's signature.
      const row = { voucher: { channel: config, maxClaimableAmount: accepted.signedMaxClaimable }, signature: accepted.signature, totalClaimed: accepted.newCumulative }
      yield* Effect.promise(async () =>
        c.mined(await c.walletOf(c.relayer).writeContract({
          address: BATCH_SETTLEMENT_ADDRESS, abi: officialBatchSettlementAbi, functionName: "claimWithSignature", args: [[row], await c.signClaims([row])]
        }))
      )
      expect(yield* Effect.promise(() => onChainState(channelId))).toEqual({ balance: 1_000n, totalClaimed: 200n })
      expect(yield* verify(yield* voucherAt(100n))).toEqual({
        _tag: "Corrective",
        reason: "invalid_batch_settlement_evm_cumulative_amount_mismatch",
        expectedMaxClaimable: 200n,
        channelState: { channelId, balance: "1000", totalClaimed: "0", withdrawRequestedAt: 0, refundNonce: "0", chargedCumulativeAmount: "100" },
        voucherState: { signedMaxClaimable: "100", signature: payload.voucher.signature }
      })
      const beyond = { ...state, chargedCumulative: 950n }
      const over = yield* voucherAt(1_050n)
      const error = yield* Effect.flip(verifyVoucher({ kind: "voucher", config, voucher: over.voucher, price: 100n, state: beyond, ours, chain }))
      expect(error.reason).toBe("invalid_batch_settlement_evm_cumulative_exceeds_balance")
    }))

  it.effect("refuses a deposit for a channel that pays someone else, before its signatures", () =>
    Effect.gen(function* () {
      const config = { ...c.configFor("someone else"), receiver: c.relayer.address }
      const { payload: official } = yield* Effect.promise(() => c.depositPayload(config, 1_000n))
      const payload = asDeposit(yield* throughHeader(official))
      const state = { balance: 0n, totalClaimed: 0n, chargedCumulative: 0n, withdrawRequestedAt: 0, refundNonce: 0n }
      const error = yield* Effect.flip(verifyDeposit({
        payload, price: 100n, state, ours, tokenDomain: { name: "USDC", version: "2" }, chain, now: Math.floor(Date.now() / 1000), minValiditySeconds: 60
      }))
      expect(error.reason).toBe("invalid_batch_settlement_evm_receiver_mismatch")
    }))
})
