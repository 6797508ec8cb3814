// Channel payloads the official @x402/evm client signs, decoded from PAYMENT-SIGNATURE and verified off chain: the
// voucher's signer (a payer authorizer's key locally, the payer through ERC-1271 when it is zero, bounded in time) and
// the deposit's ERC-3009 authorization to the collector, bound to its channel.
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Schema, TestClock } from "effect"
import { zeroAddress } from "viem"
import { DepositPayload, decodeChannelPaymentSignature, RefundPayload } from "../../layers/x402/batchSettlement/payloads.js"
import { verifyRefund } from "../../layers/x402/batchSettlement/refund.js"
import { verifyDeposit } from "../../layers/x402/batchSettlement/deposit.js"
import { type HashSignatureReader } from "../../layers/x402/batchSettlement/signature.js"
import { verifyVoucher } from "../../layers/x402/batchSettlement/voucher.js"
import { encodeHeaderJson } from "../../layers/x402/v2.js"
import { configFor, depositPayload, ours, payer, requirements, stateOf, stranger, voucherPayload } from "../support/channelPayloads.js"

const noChain: HashSignatureReader = { verifyHash: () => Promise.reject(new Error("no chain in this test")) }
const chainSaying = (answer: boolean, calls: Array<string> = []): HashSignatureReader => ({
  verifyHash: (args) => {
    calls.push(args.address)
    return Promise.resolve(answer)
  }
})
const now = () => Math.floor(Date.now() / 1000)

describe("decodeChannelPaymentSignature", () => {
  it.effect("decodes the official client's deposit, voucher and refund payloads from the header", () =>
    Effect.gen(function* () {
      const config = configFor("decode")
      const deposit = yield* Effect.promise(() => depositPayload(config, 1_000n, 100n))
      const voucher = yield* Effect.promise(() => voucherPayload(config, 200n))
      const refund = { type: "refund", channelConfig: config, voucher: voucher.voucher, amount: "500" }
      for (const payload of [deposit, voucher, refund]) {
        const decoded = yield* decodeChannelPaymentSignature(encodeHeaderJson({ x402Version: 2, accepted: requirements, payload }))
        expect(decoded.payload).toEqual(payload)
      }
    }))

  it.effect("refuses a payload that is not a channel payload, and a v1 one", () =>
    Effect.gen(function* () {
      const voucher = yield* Effect.promise(() => voucherPayload(configFor("decode"), 200n))
      const bad = [
        { x402Version: 2, accepted: requirements, payload: { ...voucher, type: "claim" } },
        { x402Version: 2, accepted: requirements, payload: { ...voucher, voucher: { ...voucher.voucher, maxClaimableAmount: (1n << 128n).toString() } } },
        { x402Version: 2, accepted: requirements, payload: { ...voucher, channelConfig: { ...voucher.channelConfig, payer: "0x12" } } }
      ]
      for (const json of bad) expect((yield* Effect.flip(decodeChannelPaymentSignature(encodeHeaderJson(json)))).reason).toBe("invalid_payload")
      expect((yield* Effect.flip(decodeChannelPaymentSignature(encodeHeaderJson({ x402Version: 1, payload: voucher })))).reason).toBe("invalid_x402_version")
    }))
})

describe("verifyVoucher", () => {
  const config = configFor("voucher")
  const state = stateOf({ balance: 1_000n, chargedCumulative: 100n })
  const verify = (payload: Awaited<ReturnType<typeof voucherPayload>>, reader: HashSignatureReader = noChain) =>
    verifyVoucher({ kind: "voucher", config: payload.channelConfig, voucher: payload.voucher, price: 100n, state, ours, chain: { reader, timeoutMs: 5_000 } })

  it.effect("accepts the payer authorizer's voucher for charged + price without asking the chain", () =>
    Effect.gen(function* () {
      const accepted = yield* verify(yield* Effect.promise(() => voucherPayload(config, 200n)))
      expect(accepted).toMatchObject({ _tag: "Accepted", newCumulative: 200n, amount: 100n, signedMaxClaimable: 200n })
    }))

  it.effect("refuses a voucher another key signed, before anything about the channel's state is answered", () =>
    Effect.gen(function* () {
      const forged = yield* Effect.promise(() => voucherPayload(config, 200n, stranger))
      expect((yield* Effect.flip(verify(forged))).reason).toBe("invalid_batch_settlement_evm_voucher_signature")
      const staleAndForged = yield* Effect.promise(() => voucherPayload(config, 150n, stranger))
      expect((yield* Effect.flip(verify(staleAndForged))).reason).toBe("invalid_batch_settlement_evm_voucher_signature")
    }))

  it.effect("refuses a voucher whose signature was taken from another ceiling", () =>
    Effect.gen(function* () {
      const signed = yield* Effect.promise(() => voucherPayload(config, 150n))
      const moved = { ...signed, voucher: { ...signed.voucher, maxClaimableAmount: "200" } }
      expect((yield* Effect.flip(verify(moved))).reason).toBe("invalid_batch_settlement_evm_voucher_signature")
    }))

  it.effect("refuses a channel that is not ours before checking its signature", () =>
    Effect.gen(function* () {
      const theirs = yield* Effect.promise(() => voucherPayload(configFor("voucher", { receiver: stranger.address }), 200n))
      expect((yield* Effect.flip(verify(theirs))).reason).toBe("invalid_batch_settlement_evm_receiver_mismatch")
    }))

  it.effect("without a payer authorizer, asks the chain (ERC-1271) only when the payer's key did not sign", () =>
    Effect.gen(function* () {
      const smart = configFor("smart", { payerAuthorizer: zeroAddress })
      const byKey = yield* Effect.promise(() => voucherPayload(smart, 200n))
      const calls: Array<string> = []
      expect((yield* verify(byKey, chainSaying(false, calls)))._tag).toBe("Accepted")
      expect(calls).toEqual([])
      const byContract = yield* Effect.promise(() => voucherPayload(smart, 200n, stranger))
      expect((yield* verify(byContract, chainSaying(true, calls)))._tag).toBe("Accepted")
      expect(calls).toEqual([payer.address])
      expect((yield* Effect.flip(verify(byContract, chainSaying(false)))).reason).toBe("invalid_batch_settlement_evm_voucher_signature")
    }))

  it.effect("an ERC-1271 check the chain does not answer in time is refused as retryable", () =>
    Effect.gen(function* () {
      const smart = configFor("smart", { payerAuthorizer: zeroAddress })
      const byContract = yield* Effect.promise(() => voucherPayload(smart, 200n, stranger))
      const asked = yield* Deferred.make<void>()
      const silent: HashSignatureReader = {
        verifyHash: () => {
          Effect.runSync(Deferred.succeed(asked, undefined))
          return new Promise<boolean>(() => {})
        }
      }
      const fiber = yield* Effect.fork(Effect.flip(verify(byContract, silent)))
      yield* Deferred.await(asked)
      // The timeout's timer may be armed just after the chain is asked: move the clock until the check gives up.
      for (let i = 0; i < 5 && Option.isNone(yield* Fiber.poll(fiber)); i++) yield* TestClock.adjust("6 seconds")
      const error = yield* Fiber.join(fiber)
      expect(error).toMatchObject({ reason: "invalid_batch_settlement_evm_rpc_read_failed", retryable: true })
    }))
})

describe("verifyDeposit", () => {
  const config = configFor("deposit")
  const verify = (payload: DepositPayload, at = now()) =>
    verifyDeposit({ payload, price: 100n, state: stateOf({ balance: 0n }), ours, tokenDomain: { name: "USDC", version: "2" }, chain: { reader: chainSaying(false), timeoutMs: 5_000 }, now: at, minValiditySeconds: 60 })

  it.effect("accepts the official client's deposit: its authorization to the collector and its first voucher", () =>
    Effect.gen(function* () {
      const payload = yield* Effect.promise(() => depositPayload(config, 1_000n, 100n))
      const verified = yield* verify(payload)
      expect(verified.deposit).toMatchObject({ payer: payer.address, amount: 1_000n, validAfter: 0n })
      expect(verified.voucher).toMatchObject({ _tag: "Accepted", newCumulative: 100n, amount: 100n })
    }))

  it.effect("refuses an authorization moved to another channel (its nonce binds it to the one it was signed for)", () =>
    Effect.gen(function* () {
      const payload = yield* Effect.promise(() => depositPayload(config, 1_000n, 100n))
      const other = yield* Effect.promise(() => depositPayload(configFor("other"), 1_000n, 100n))
      const moved = Schema.decodeUnknownSync(DepositPayload)({ ...other, deposit: payload.deposit })
      expect((yield* Effect.flip(verify(moved))).reason).toBe("invalid_batch_settlement_evm_receive_authorization_signature")
      const more = { ...payload, deposit: { ...payload.deposit, amount: "2000" } }
      expect((yield* Effect.flip(verify(more))).reason).toBe("invalid_batch_settlement_evm_receive_authorization_signature")
    }))

  it.effect("refuses an authorization about to expire, and one not valid yet", () =>
    Effect.gen(function* () {
      const payload = yield* Effect.promise(() => depositPayload(config, 1_000n, 100n))
      expect((yield* Effect.flip(verify(payload, now() + 3_600))).reason).toBe("invalid_batch_settlement_evm_payload_authorization_valid_before")
      const auth = "erc3009Authorization" in payload.deposit.authorization ? payload.deposit.authorization.erc3009Authorization : undefined
      if (auth === undefined) throw new Error("no ERC-3009 authorization")
      const later = { ...payload, deposit: { ...payload.deposit, authorization: { erc3009Authorization: { ...auth, validAfter: String(now() + 600) } } } }
      expect((yield* Effect.flip(verify(later))).reason).toBe("invalid_batch_settlement_evm_payload_authorization_valid_after")
    }))

  it.effect("refuses a deposit whose voucher is above the deposit, and a Permit2 deposit", () =>
    Effect.gen(function* () {
      const payload = yield* Effect.promise(() => depositPayload(config, 50n, 100n))
      expect((yield* Effect.flip(verify(payload))).reason).toBe("invalid_batch_settlement_evm_cumulative_exceeds_balance")
      const ok = yield* Effect.promise(() => depositPayload(config, 1_000n, 100n))
      const permit2 = Schema.decodeUnknownSync(DepositPayload)({
        ...ok,
        deposit: {
          amount: "1000",
          authorization: {
            permit2Authorization: {
              from: payer.address, permitted: { token: ours.token, amount: "1000" }, spender: ours.token, nonce: "1", deadline: "9999999999",
              witness: { channelId: ok.voucher.channelId }, signature: ok.voucher.signature
            }
          }
        }
      })
      expect((yield* Effect.flip(verify(permit2))).reason).toBe("invalid_batch_settlement_evm_erc3009_authorization_required")
    }))
})


describe("verifyRefund", () => {
  const config = configFor("refund")
  const state = stateOf({ balance: 1_000n, totalClaimed: 100n, chargedCumulative: 300n })
  const refund = (max: bigint, amount?: string) =>
    Effect.promise(() => voucherPayload(config, max)).pipe(
      Effect.map((v) => Schema.decodeUnknownSync(RefundPayload)({ type: "refund", channelConfig: config, voucher: v.voucher, ...(amount === undefined ? {} : { amount }) })),
      Effect.flatMap((payload) => verifyRefund({ payload, state, ours, chain: { reader: noChain, timeoutMs: 5_000 } }))
    )

  it.effect("returns all that is unclaimed after the zero-charge voucher, or the part asked for", () =>
    Effect.gen(function* () {
      expect(yield* refund(300n)).toMatchObject({ amount: 700n, voucher: { amount: 0n, newCumulative: 300n } })
      expect(yield* refund(300n, "250")).toMatchObject({ amount: 250n })
    }))

  it.effect("answers a refund voucher that charges (charged + anything) with the corrective state, and refuses too much", () =>
    Effect.gen(function* () {
      expect(yield* refund(400n)).toMatchObject({ _tag: "Corrective", expectedMaxClaimable: 300n })
      expect((yield* Effect.flip(refund(300n, "701"))).reason).toBe("invalid_batch_settlement_evm_refund_amount_invalid")
      expect((yield* Effect.flip(refund(300n, "0"))).reason).toBe("invalid_batch_settlement_evm_refund_amount_invalid")
    }))
})
