// A payment as a request presents it, before it is decoded: which x402 version and the text whose sha256 is its
// read-back handle. Built from HTTP headers (X-PAYMENT v1, PAYMENT-SIGNATURE v2) or from an already-decoded v2 payload
// (x402's MCP transport, `_meta["x402/payment"]`).
import { Effect } from "effect"
import { decodePaymentSignatureHeader, encodeHeaderJson } from "./v2.js"
import { invalidPayload } from "./header.js"
import { type PaymentRejected, sha256 } from "./payment.js"
import { paymentIdentifierOf } from "./paymentIdentifier.js"

export interface PaymentCredential {
  readonly version: 1 | 2
  /** The header value as sent, trimmed (for a decoded payload: its canonical header encoding). */
  readonly raw: string
}

/** What a paid request brought: nothing (answer the challenge), a credential, or a refusal decided before decoding. */
export type PresentedPayment = PaymentCredential | PaymentRejected | undefined

/** The payment headers a request may carry (lower-case, as HTTP header schemas decode them). */
export interface PaymentRequestHeaders {
  readonly "x-payment"?: string | undefined
  readonly "payment-signature"?: string | undefined
}

const present = (value: string | undefined) => (value === undefined || value.trim() === "" ? undefined : value.trim())

/**
 * The payment of a request. Both headers at once is refused (402 invalid_payload) rather than guessed at: a payer
 * signs one payload per request, so two headers mean a broken client or a proxy mixing requests.
 */
export const presentedFromHeaders = (headers: PaymentRequestHeaders): PresentedPayment => {
  const v1 = present(headers["x-payment"])
  const v2 = present(headers["payment-signature"])
  if (v1 !== undefined && v2 !== undefined) {
    return invalidPayload("send one payment header: PAYMENT-SIGNATURE (x402 v2) or X-PAYMENT (x402 v1), not both")
  }
  return v2 !== undefined ? { version: 2, raw: v2 } : v1 !== undefined ? { version: 1, raw: v1 } : undefined
}

/**
 * An x402 v2 PaymentPayload handed over already decoded (an MCP client's `_meta["x402/payment"]`). It is re-encoded as
 * the PAYMENT-SIGNATURE header an HTTP client would send, so it is bounded and verified by the same codec, and that
 * encoding is its read-back handle (GET /api/v1/execute/:id with `PAYMENT-SIGNATURE: <handle>` shows the output).
 */
export const presentedFromV2Payload = (payload: unknown): PresentedPayment => {
  if (payload === undefined || payload === null) return undefined
  try {
    return { version: 2, raw: encodeHeaderJson(payload) }
  } catch {
    return invalidPayload("the x402 payment payload is not JSON")
  }
}

/** The values a later request may present as proof of holding a payment (status, retry, rating): either header's. */
export const proofsFromHeaders = (headers: PaymentRequestHeaders): ReadonlyArray<string> =>
  [present(headers["payment-signature"]), present(headers["x-payment"])].filter((v): v is string => v !== undefined)

/** Whether a later request proves to hold the payment whose credential hashed to `headerSha256` (either header). */
export const holdsPayment = (proofs: ReadonlyArray<string>, headerSha256: string): boolean =>
  proofs.some((proof) => sha256(proof.trim()) === headerSha256)

/** The x402 v2 payment-identifier id a credential carries (never one in v1), read without verifying the payment. */
export const paymentIdentifierOfCredential = (credential: PaymentCredential): Effect.Effect<string | undefined, PaymentRejected> =>
  credential.version === 1
    ? Effect.succeed(undefined)
    : Effect.flatMap(decodePaymentSignatureHeader(credential.raw.trim()), (payload) => paymentIdentifierOf(payload.extensions))
