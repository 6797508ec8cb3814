// Our upto offer and payload codec against the official client: the client signs our offer as is (its witness names
// our treasury and our writer), we decode what it sends, and the Permit2 nonce keys the payments table as 32 bytes.
import { describe, expect, it } from "@effect/vitest"
import { toClientEvmSigner } from "@x402/evm"
import { UptoEvmScheme } from "@x402/evm/upto/client"
import { Effect } from "effect"
import { getAddress } from "viem"
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts"
import { uptoOffer } from "../../layers/x402/upto/offer.js"
import { decodeUptoPaymentSignature, namesUpto, nonceKey, UPTO } from "../../layers/x402/upto/payload.js"
import { encodeHeaderJson } from "../../layers/x402/v2.js"

const treasury = privateKeyToAccount(generatePrivateKey()).address
const writer = privateKeyToAccount(generatePrivateKey()).address
const token = getAddress("0x036cbd53842c5426634e7929541ec2318f3dcf7e")
const offer = uptoOffer({ caip2: "eip155:84532", maximum: 21_000n, token, receiver: treasury, facilitator: writer, maxTimeoutSeconds: 130, tokenDomain: { name: "USDC", version: "2" } })

describe("upto offer and payload", () => {
  it.effect("is the requirement the official client signs: the maximum, our treasury as witness.to, our writer as facilitator", () =>
    Effect.gen(function* () {
      expect(offer).toEqual({ scheme: UPTO, network: "eip155:84532", asset: token, amount: "21000", payTo: treasury, maxTimeoutSeconds: 130, extra: { name: "USDC", version: "2", facilitatorAddress: writer } })
      const payer = privateKeyToAccount(generatePrivateKey())
      const { payload } = yield* Effect.promise(() => new UptoEvmScheme(toClientEvmSigner(payer)).createPaymentPayload(2, { ...offer, network: "eip155:84532", extra: { ...offer.extra } }))
      const header = encodeHeaderJson({ x402Version: 2, accepted: offer, payload })
      const decoded = yield* decodeUptoPaymentSignature(header)
      const auth = decoded.payload.permit2Authorization
      expect(auth).toMatchObject({ from: payer.address, permitted: { token, amount: "21000" }, witness: { to: getAddress(treasury), facilitator: getAddress(writer), validAfter: "0" } })
      expect(namesUpto({ x402Version: 2, accepted: offer, payload })).toBe(true)
      expect(namesUpto({ x402Version: 2, accepted: { ...offer, scheme: "exact" }, payload })).toBe(false)
    }))

  it.effect("refuses a payload that is not a Permit2 upto authorization, and v1", () =>
    Effect.gen(function* () {
      const wrong = yield* Effect.flip(decodeUptoPaymentSignature(encodeHeaderJson({ x402Version: 2, accepted: offer, payload: { signature: "0x12", authorization: {} } })))
      expect(wrong.reason).toBe("invalid_payload")
      const v1 = yield* Effect.flip(decodeUptoPaymentSignature(encodeHeaderJson({ x402Version: 1, accepted: offer, payload: {} })))
      expect(v1.reason).toBe("invalid_x402_version")
    }))

  it("keys a Permit2 nonce as 32 lowercase hex bytes", () => {
    expect(nonceKey("1")).toBe(`0x${"0".repeat(63)}1`)
    expect(nonceKey((2n ** 256n - 1n).toString())).toBe(`0x${"f".repeat(64)}`)
  })
})
