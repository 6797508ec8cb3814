// The x402 v2 `upto` payment payload (PAYMENT-SIGNATURE naming scheme "upto"): a Permit2 witness transfer of at most
// `permitted.amount` to the x402UptoPermit2Proxy, whose witness names the receiver and the one facilitator that may
// settle it (x402 specs/schemes/upto/scheme_upto_evm.md; @x402/evm's UptoPermit2Payload).
import type { UptoPermit2Payload } from "@x402/evm"
import { Schema } from "effect"
import { paymentPayloadV2, paymentSignatureDecoder } from "../v2.js"

export const UPTO = "upto"

const hexOf = (pattern: RegExp, description: string) =>
  Schema.TemplateLiteral(Schema.Literal("0x"), Schema.String).pipe(Schema.pattern(pattern), Schema.annotations({ description }))
const Address = hexOf(/^0x[0-9a-fA-F]{40}$/, "an EVM address")
/** 65 bytes for a key, longer for ERC-1271 / ERC-6492 (bounded by the header's length). */
const Signature = hexOf(/^0x(?:[0-9a-fA-F]{2})+$/, "a hex signature")
const Uint256String = Schema.String.pipe(
  Schema.pattern(/^(0|[1-9]\d{0,77})$/),
  Schema.filter((s) => BigInt(s) < 1n << 256n, { message: () => "must fit in uint256" })
)

export const UptoAuthorization = Schema.Struct({
  from: Address,
  permitted: Schema.Struct({ token: Address, amount: Uint256String }),
  spender: Address,
  nonce: Uint256String,
  deadline: Uint256String,
  witness: Schema.Struct({ to: Address, facilitator: Address, validAfter: Uint256String })
})
export type UptoAuthorization = typeof UptoAuthorization.Type

export const UptoPayload = Schema.Struct({ signature: Signature, permit2Authorization: UptoAuthorization })
export type UptoPayload = typeof UptoPayload.Type

export const UptoPaymentPayloadV2 = paymentPayloadV2(UptoPayload)
export type UptoPaymentPayloadV2 = typeof UptoPaymentPayloadV2.Type

export const decodeUptoPaymentSignature = paymentSignatureDecoder(UptoPaymentPayloadV2, {
  version: "upto payments are x402 v2 payloads in PAYMENT-SIGNATURE",
  shape: "PAYMENT-SIGNATURE does not hold an x402 v2 upto Permit2 payload"
})

/** Whether a decoded PAYMENT-SIGNATURE's accepted requirement names the upto scheme (read before decoding the rest). */
export const namesUpto = (json: unknown): boolean => {
  if (typeof json !== "object" || json === null || !("accepted" in json)) return false
  const accepted = json.accepted
  return typeof accepted === "object" && accepted !== null && "scheme" in accepted && accepted.scheme === UPTO
}

/** The Permit2 nonce as the payments table keys authorizations: 32 bytes, lowercase hex. */
export const nonceKey = (nonce: string) => `0x${BigInt(nonce).toString(16).padStart(64, "0")}` as const

// What we decode has the shape the package's client sends and its facilitator reads: that this compiles is the proof.
export const asOfficialUpto = (p: UptoPayload): UptoPermit2Payload => p
