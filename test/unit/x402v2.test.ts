// The x402 v2 wire codec: PAYMENT-SIGNATURE decoding and its bounds, the challenge and receipt shapes, the
// payment-identifier extension, and how a request's headers become one payment credential.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { holdsPayment, presentedFromHeaders, presentedFromV2Payload, proofsFromHeaders } from "../../layers/x402/credential.js"
import { PaymentRejected, sha256 } from "../../layers/x402/payment.js"
import { paymentIdentifierDeclaration, paymentIdentifierOf } from "../../layers/x402/paymentIdentifier.js"
import type { PaymentRequirements } from "../../layers/x402/requirements.js"
import { caip2Of, decodePaymentSignatureHeader, encodeHeaderJson, paymentRequiredV2 } from "../../layers/x402/v2.js"
import { receiptHeaders } from "../../src/http/PaymentHeaders.js"

const ADDRESS = `0x${"ab".repeat(20)}`
const payloadV2 = (overrides: Record<string, unknown> = {}) => ({
  x402Version: 2,
  resource: { url: "http://127.0.0.1/api/v1/execute", description: "Echo", mimeType: "application/json" },
  accepted: { scheme: "exact", network: "eip155:84532", asset: ADDRESS, amount: "11000", payTo: ADDRESS, maxTimeoutSeconds: 300, extra: { name: "USDC", version: "2" } },
  payload: {
    signature: `0x${"11".repeat(65)}`,
    authorization: { from: ADDRESS, to: ADDRESS, value: "11000", validAfter: "0", validBefore: "1900000000", nonce: `0x${"22".repeat(32)}` }
  },
  ...overrides
})

const reasonOf = <A>(effect: Effect.Effect<A, PaymentRejected>) => Effect.map(Effect.flip(effect), (e) => e.reason)

describe("x402 v2 codec", () => {
  it.effect("decodes a PAYMENT-SIGNATURE header holding an exact EVM payload with its accepted requirements", () =>
    Effect.gen(function* () {
      const decoded = yield* decodePaymentSignatureHeader(encodeHeaderJson(payloadV2()))
      expect(decoded.accepted).toMatchObject({ network: "eip155:84532", amount: "11000" })
      expect(decoded.payload.authorization.validAfter).toBe("0")
    }))

  it.effect("refuses garbage, oversized and too deeply nested headers as invalid_payload before parsing them", () =>
    Effect.gen(function* () {
      expect(yield* reasonOf(decodePaymentSignatureHeader("%%% not base64"))).toBe("invalid_payload")
      expect(yield* reasonOf(decodePaymentSignatureHeader("A".repeat(8 * 1024 + 1)))).toBe("invalid_payload")
      const deep = Buffer.from(`{"x402Version":2,"x":${"[".repeat(65)}${"]".repeat(65)}}`).toString("base64")
      expect(yield* reasonOf(decodePaymentSignatureHeader(deep))).toBe("invalid_payload")
    }))

  it.effect("refuses a payload missing the accepted requirements or the authorization as invalid_payload, naming the path", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(decodePaymentSignatureHeader(encodeHeaderJson({ ...payloadV2(), accepted: undefined })))
      expect(error.reason).toBe("invalid_payload")
      expect(error.details?.["issues"]).toEqual(expect.arrayContaining([expect.objectContaining({ path: "accepted" })]))
      expect(yield* reasonOf(decodePaymentSignatureHeader(encodeHeaderJson(payloadV2({ payload: { signature: "0x12" } }))))).toBe("invalid_payload")
    }))

  it.effect("refuses a v1 payload sent as PAYMENT-SIGNATURE as invalid_x402_version", () =>
    Effect.gen(function* () {
      const v1 = { x402Version: 1, scheme: "exact", network: "base-sepolia", payload: payloadV2().payload }
      expect(yield* reasonOf(decodePaymentSignatureHeader(encodeHeaderJson(v1)))).toBe("invalid_x402_version")
    }))

  it("builds the v2 challenge from the v1 requirements: CAIP-2 network, amount, resource moved out, EIP-712 domain kept", () => {
    const v1: PaymentRequirements = {
      scheme: "exact",
      network: "base-sepolia",
      maxAmountRequired: "100000",
      resource: "http://x/api/v1/agents",
      description: "fee",
      mimeType: "application/json",
      payTo: ADDRESS,
      maxTimeoutSeconds: 300,
      asset: ADDRESS,
      extra: { name: "USDC", version: "2" }
    }
    expect(caip2Of(84532)).toBe("eip155:84532")
    expect(paymentRequiredV2({ accepts: [v1], error: "payment_required" }, caip2Of(84532))).toEqual({
      x402Version: 2,
      error: "payment_required",
      resource: { url: "http://x/api/v1/agents", description: "fee", mimeType: "application/json" },
      accepts: [{ scheme: "exact", network: "eip155:84532", asset: ADDRESS, amount: "100000", payTo: ADDRESS, maxTimeoutSeconds: 300, extra: { name: "USDC", version: "2" } }]
    })
    expect(paymentRequiredV2({ accepts: [v1], error: "x" }, "eip155:1", { "payment-identifier": paymentIdentifierDeclaration }).extensions).toEqual({
      "payment-identifier": paymentIdentifierDeclaration
    })
  })

  it("answers with the receipt under the header of the payer's version", () => {
    const settlement = { txHash: "0xabc", payer: ADDRESS }
    expect(Object.keys(receiptHeaders({ ...settlement, version: 2, network: "eip155:84532" }))).toEqual(["PAYMENT-RESPONSE"])
    const v1 = receiptHeaders({ ...settlement, version: 1, network: "base-sepolia" })
    expect(JSON.parse(Buffer.from(v1["X-PAYMENT-RESPONSE"] ?? "", "base64").toString())).toEqual({
      success: true,
      transaction: "0xabc",
      network: "base-sepolia",
      payer: ADDRESS
    })
  })
})

describe("payment-identifier extension", () => {
  const withId = (id: unknown) => ({ "payment-identifier": { ...paymentIdentifierDeclaration, info: { required: false, id } } })

  it("reads the payer's id; an absent extension or an echo of our declaration is no id", () => {
    expect(paymentIdentifierOf(withId("pay_7d5d747be160e280504c099d984bcfe0"))).toEqual(Either.right("pay_7d5d747be160e280504c099d984bcfe0"))
    expect(paymentIdentifierOf(undefined)).toEqual(Either.right(undefined))
    expect(paymentIdentifierOf({ "payment-identifier": paymentIdentifierDeclaration })).toEqual(Either.right(undefined))
  })

  it("refuses an id that breaks the format instead of ignoring it (16-128 of letters, digits, - and _)", () => {
    for (const bad of ["short", "x".repeat(129), "has spaces in it ok?", 42]) {
      const result = paymentIdentifierOf(withId(bad))
      expect(Either.isLeft(result) && result.left.reason).toBe("invalid_payload")
    }
  })
})

describe("payment credentials", () => {
  it("takes PAYMENT-SIGNATURE as v2 and X-PAYMENT as v1, trimmed; blank headers are no payment", () => {
    expect(presentedFromHeaders({ "payment-signature": " abc " })).toEqual({ version: 2, raw: "abc" })
    expect(presentedFromHeaders({ "x-payment": "def" })).toEqual({ version: 1, raw: "def" })
    expect(presentedFromHeaders({ "x-payment": "  ", "payment-signature": "" })).toBeUndefined()
  })

  it("refuses both headers at once as invalid_payload", () => {
    const both = presentedFromHeaders({ "x-payment": "a", "payment-signature": "b" })
    expect(both instanceof PaymentRejected && both.reason).toBe("invalid_payload")
  })

  it("encodes a decoded v2 payload (MCP) as the PAYMENT-SIGNATURE header an HTTP client would send", () => {
    const payload = payloadV2()
    expect(presentedFromV2Payload(payload)).toEqual({ version: 2, raw: encodeHeaderJson(payload) })
    expect(presentedFromV2Payload(undefined)).toBeUndefined()
    expect(presentedFromV2Payload(null)).toBeUndefined()
  })

  it("proves holding a payment with its credential text in either header", () => {
    const proofs = proofsFromHeaders({ "x-payment": "other", "payment-signature": " handle " })
    expect(holdsPayment(proofs, sha256("handle"))).toBe(true)
    expect(holdsPayment(proofsFromHeaders({ "x-payment": "handle" }), sha256("handle"))).toBe(true)
    expect(holdsPayment(proofsFromHeaders({}), sha256("handle"))).toBe(false)
  })
})
