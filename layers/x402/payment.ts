// The x402 v1 "exact" EVM payment: the decoded X-PAYMENT payload, a verified payment, and why one is refused.
import { Data, Schema } from "effect"
import { createHash } from "node:crypto"
import type { Hex } from "viem"

const IntString = Schema.String.pipe(Schema.pattern(/^\d{1,78}$/))
const HexAddress = Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{40}$/))

/** The decoded X-PAYMENT header (x402 v1, scheme "exact", EVM). */
export const PaymentPayload = Schema.Struct({
  x402Version: Schema.Number,
  scheme: Schema.String,
  network: Schema.String,
  payload: Schema.Struct({
    signature: Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]+$/)),
    authorization: Schema.Struct({
      from: HexAddress,
      to: HexAddress,
      value: IntString,
      validAfter: IntString,
      validBefore: IntString,
      nonce: Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{64}$/))
    })
  })
})
export type PaymentPayload = typeof PaymentPayload.Type

/** A payment whose signature, amount, recipient, window, nonce and funds all checked out. */
export interface VerifiedPayment {
  readonly payer: `0x${string}`
  readonly payTo: `0x${string}`
  readonly asset: `0x${string}`
  readonly network: string
  readonly amount: bigint
  readonly nonce: Hex
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly signature: Hex
  /** sha256 of the raw header: proves later that a caller holds the same payment header. */
  readonly headerSha256: string
  readonly payload: PaymentPayload
}

/** Why a payment was refused; `reason` uses the x402 error reason names where one exists. */
export type RejectionReason =
  | "invalid_payload"
  | "invalid_x402_version"
  | "unsupported_scheme"
  | "invalid_network"
  | "invalid_exact_evm_payload_recipient_mismatch"
  | "invalid_exact_evm_payload_authorization_value"
  | "invalid_exact_evm_payload_authorization_valid_after"
  | "invalid_exact_evm_payload_authorization_valid_before"
  | "invalid_exact_evm_payload_signature"
  | "payment_already_used"
  | "insufficient_funds"
  | "settlement_failed"
  | "unexpected_verify_error"

export class PaymentRejected extends Data.TaggedError("PaymentRejected")<{
  readonly reason: RejectionReason
  readonly message: string
  readonly details?: Record<string, unknown>
}> {}

/** Settlement did not happen. `final`: it never will with this authorization (revert, used, expired). */
export class SettlementError extends Data.TaggedError("SettlementError")<{
  readonly reason: RejectionReason | "rpc_error"
  readonly message: string
  readonly final: boolean
}> {}

export const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")
