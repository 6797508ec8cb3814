// The x402 v2 wire (exact EVM): the PAYMENT-SIGNATURE payload codec, the PAYMENT-REQUIRED challenge and the
// PAYMENT-RESPONSE receipt, with CAIP-2 network ids. The v1 codec is header.ts; both carry the same authorization.
import { Effect, Schema } from "effect"
import { decodeBase64Json, decodeWith } from "./header.js"
import { ExactEvmPayload, PaymentRejected } from "./payment.js"
import type { PaymentRequirements } from "./requirements.js"

/** The CAIP-2 id of an EVM chain, as x402 v2 names networks ("eip155:84532" for Base Sepolia and our devnet). */
export const caip2Of = (chainId: number): string => `eip155:${chainId}`

const JsonObject = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/** What a resource is (v2 moves it out of the requirements into its own object). */
export const ResourceInfo = Schema.Struct({
  url: Schema.String,
  description: Schema.optional(Schema.String),
  mimeType: Schema.optional(Schema.String)
})

/** One x402 v2 `accepts[]` entry: v1's minus resource/description/mimeType, `amount` for maxAmountRequired, CAIP-2 network. */
export const PaymentRequirementsV2 = Schema.Struct({
  scheme: Schema.String,
  network: Schema.String,
  asset: Schema.String,
  amount: Schema.String,
  payTo: Schema.String,
  maxTimeoutSeconds: Schema.Number,
  extra: Schema.optional(JsonObject)
})
export type PaymentRequirementsV2 = typeof PaymentRequirementsV2.Type

/** An x402 v2 PAYMENT-SIGNATURE payload: the requirements the payer accepted, echoed, around a scheme's own payload. */
export const paymentPayloadV2 = <P extends Schema.Schema.Any>(payload: P) =>
  Schema.Struct({
    x402Version: Schema.Literal(2),
    resource: Schema.optional(ResourceInfo),
    accepted: PaymentRequirementsV2,
    payload,
    extensions: Schema.optional(JsonObject)
  })

/** The decoded PAYMENT-SIGNATURE header of an `exact` payment: the signed authorization. */
export const PaymentPayloadV2 = paymentPayloadV2(ExactEvmPayload)
export type PaymentPayloadV2 = typeof PaymentPayloadV2.Type

/** A decoder of PAYMENT-SIGNATURE headers into `schema`, bounded like X-PAYMENT; another x402 version is refused by name. */
export const paymentSignatureDecoder = <A, I>(schema: Schema.Schema<A, I>, messages: { readonly version: string; readonly shape: string }) =>
  (header: string): Effect.Effect<A, PaymentRejected> =>
    Effect.gen(function* () {
      const json = yield* decodeBase64Json(header, "PAYMENT-SIGNATURE")
      const version = typeof json === "object" && json !== null && "x402Version" in json ? json.x402Version : undefined
      if (version !== 2) {
        return yield* new PaymentRejected({
          reason: "invalid_x402_version",
          message: messages.version,
          details: { x402Version: typeof version === "number" ? version : null }
        })
      }
      return yield* decodeWith(schema, json, messages.shape)
    })

/** Decodes an x402 v2 PAYMENT-SIGNATURE header of an `exact` payment. */
export const decodePaymentSignatureHeader = paymentSignatureDecoder(PaymentPayloadV2, {
  version: "PAYMENT-SIGNATURE carries x402 v2 payment payloads (send a v1 payload in X-PAYMENT)",
  shape: "PAYMENT-SIGNATURE does not hold an x402 v2 exact EVM payment payload"
})

/** The x402 v2 PaymentRequired object: the PAYMENT-REQUIRED header's JSON, and an MCP paid tool's error result. */
export interface PaymentRequiredV2 {
  readonly x402Version: 2
  /** Why the payment is required: "payment_required" without one, else the rejection reason (x402 reason names). */
  readonly error: string
  readonly resource: { readonly url: string; readonly description: string; readonly mimeType: string }
  readonly accepts: ReadonlyArray<PaymentRequirementsV2>
  readonly extensions?: Readonly<Record<string, unknown>>
}

/** A v1 `accepts[]` entry in v2 form, on the v2 (CAIP-2) `network`; the EIP-712 domain stays in `extra`. */
export const requirementsV2 = (v1: PaymentRequirements, network: string): PaymentRequirementsV2 => ({
  scheme: v1.scheme,
  network,
  asset: v1.asset,
  amount: v1.maxAmountRequired,
  payTo: v1.payTo,
  maxTimeoutSeconds: v1.maxTimeoutSeconds,
  extra: { name: v1.extra.name, version: v1.extra.version }
})

/** The v2 challenge for the same quote as a v1 `accepts` list; `network` gives each entry's CAIP-2 id. */
export const paymentRequiredV2 = (
  challenge: { readonly accepts: ReadonlyArray<PaymentRequirements>; readonly error: string },
  network: string | ((v1Network: string) => string),
  extensions?: Readonly<Record<string, unknown>>
): PaymentRequiredV2 => {
  const first = challenge.accepts[0]
  return {
    x402Version: 2,
    error: challenge.error,
    resource: { url: first?.resource ?? "", description: first?.description ?? "", mimeType: first?.mimeType ?? "application/json" },
    accepts: challenge.accepts.map((a) => requirementsV2(a, typeof network === "string" ? network : network(a.network))),
    ...(extensions === undefined || Object.keys(extensions).length === 0 ? {} : { extensions })
  }
}

/** The key of the signed receipt in a settlement response's `extensions` (HTTP headers and MCP `_meta` alike). */
export const RECEIPT_EXTENSION = "receipt"

/** The settlement receipt `{success, transaction, network, payer}`: v2's SettleResponse, and v1's X-PAYMENT-RESPONSE body. */
export const settleResponse = (
  settlement: { readonly txHash: string; readonly network: string; readonly payer: string; readonly amount?: bigint | undefined },
  receipt?: unknown
) => ({
  success: true as const,
  transaction: settlement.txHash,
  network: settlement.network,
  payer: settlement.payer,
  // An upto payment settles what the call used: SettleResponse's `amount` says how much.
  ...(settlement.amount === undefined ? {} : { amount: settlement.amount.toString() }),
  // The service's signed receipt of a paid call (docs/clients.md): x402 v2's SettleResponse carries extensions, and
  // both versions' clients decode the header with a plain JSON.parse, so the extra key breaks neither.
  ...(receipt === undefined || receipt === null ? {} : { extensions: { [RECEIPT_EXTENSION]: receipt } })
})

/** base64 of UTF-8 JSON: how every x402 header (either version) carries its object. */
export const encodeHeaderJson = (value: unknown): string => Buffer.from(JSON.stringify(value), "utf8").toString("base64")
