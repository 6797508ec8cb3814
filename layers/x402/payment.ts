// The x402 "exact" EVM payment, version-neutral: the EIP-3009 authorization both wire versions carry, a verified payment,
// how the payer presented it (v1 or v2), and why one is refused.
import { Data, Schema } from "effect"
import { createHash } from "node:crypto"
import type { Hex } from "viem"

const IntString = Schema.String.pipe(Schema.pattern(/^\d{1,78}$/))
const HexAddress = Schema.String.pipe(Schema.pattern(/^0x[0-9a-fA-F]{40}$/))

/** The signed EIP-3009 TransferWithAuthorization: the same object in x402 v1 and v2 (`payload` of the exact EVM scheme). */
export const ExactEvmPayload = Schema.Struct({
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
export type ExactEvmPayload = typeof ExactEvmPayload.Type

/** The decoded X-PAYMENT header (x402 v1, scheme "exact", EVM). */
export const PaymentPayload = Schema.Struct({
  x402Version: Schema.Number,
  scheme: Schema.String,
  network: Schema.String,
  payload: ExactEvmPayload
})
export type PaymentPayload = typeof PaymentPayload.Type

/** A payment whose signature, amount, recipient, window, nonce and funds all checked out (whatever wire it came on). */
export interface VerifiedPayment {
  readonly payer: `0x${string}`
  readonly payTo: `0x${string}`
  readonly asset: `0x${string}`
  /** The chain's x402 v1 network name ("base-sepolia"): what the payments table records for every version. */
  readonly network: string
  readonly amount: bigint
  readonly nonce: Hex
  readonly validAfter: bigint
  readonly validBefore: bigint
  readonly signature: Hex
  /** sha256 of the credential's text (the raw header): proves later that a caller holds the same payment. */
  readonly headerSha256: string
  /**
   * The payer's token balance as the chain showed it at verification: the reservation counts the payer's unsettled
   * payments against it (services/payments/Repo.ts). Absent for a payment rebuilt from its row or made here.
   */
  readonly balance?: bigint
}

/** How the payer presented a verified payment: what the answer echoes, in which version, and what idempotency keys on. */
export interface Presentation {
  readonly version: 1 | 2
  /** The credential's text, trimmed (X-PAYMENT or PAYMENT-SIGNATURE value): X-PAYMENT-USED echoes it. */
  readonly handle: string
  /** The network as this version names it ("base-sepolia" in v1, "eip155:84532" in v2): the receipt's `network`. */
  readonly network: string
  /** The x402 v2 `payment-identifier` extension's id, when the payer sent one: the purchase's idempotency key. */
  readonly paymentIdentifier: string | undefined
}

/** Why a payment was refused; `reason` uses the x402 error reason names where one exists. */
export type RejectionReason =
  | "invalid_payload"
  | "invalid_x402_version"
  | "unsupported_scheme"
  | "invalid_network"
  | "invalid_payment_requirements"
  | "invalid_exact_evm_payload_recipient_mismatch"
  | "invalid_exact_evm_payload_authorization_value"
  | "invalid_exact_evm_payload_authorization_valid_after"
  | "invalid_exact_evm_payload_authorization_valid_before"
  | "invalid_exact_evm_payload_signature"
  /** A counterfactual (ERC-6492) smart account whose factory is not on X402_EIP6492_ALLOWED_FACTORIES (x402's name). */
  | "eip6492_factory_not_allowed"
  /** Deploying a counterfactual account through its factory failed before settlement (x402's name). */
  | "smart_wallet_deployment_failed"
  | "payment_already_used"
  /** The payer's own spending limits refuse it (services/limits): details.limit names which. */
  | "spending_limit_exceeded"
  | "insufficient_funds"
  | "settlement_failed"
  | "unexpected_verify_error"
  /** x402 `upto` (Permit2) refusals, in @x402/evm's names (layers/x402/upto/verify.ts). */
  | UptoRejectionReason

export type UptoRejectionReason =
  | "invalid_permit2_spender"
  | "invalid_permit2_recipient_mismatch"
  | "upto_facilitator_mismatch"
  | "permit2_deadline_expired"
  | "permit2_not_yet_valid"
  | "permit2_amount_mismatch"
  | "permit2_token_mismatch"
  | "invalid_permit2_signature"
  | "permit2_allowance_required"
  | "permit2_insufficient_balance"
  | "permit2_invalid_nonce"
  | "permit2_simulation_failed"

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
