// Our `upto` entry of an x402 v2 402's `accepts` for a metered capability: its maximum, paid to our treasury, with what
// the scheme's client signs into the Permit2 witness (`extra.facilitatorAddress`: our treasury writer, the only one the
// proxy lets settle it) and the token's EIP-712 name and version (what the client's EIP-2612 extension would sign).
import type { PaymentRequirementsV2 } from "../v2.js"
import { UPTO } from "./payload.js"

export interface UptoOfferInput {
  readonly caip2: string
  /** The capability's metered maximum: what the payer authorizes; the call settles what it used, at most this. */
  readonly maximum: bigint
  readonly token: `0x${string}`
  readonly receiver: `0x${string}`
  readonly facilitator: `0x${string}`
  readonly maxTimeoutSeconds: number
  readonly tokenDomain: { readonly name: string; readonly version: string }
}

export const uptoOffer = (input: UptoOfferInput): PaymentRequirementsV2 => ({
  scheme: UPTO,
  network: input.caip2,
  asset: input.token,
  amount: input.maximum.toString(),
  payTo: input.receiver,
  maxTimeoutSeconds: input.maxTimeoutSeconds,
  extra: { name: input.tokenDomain.name, version: input.tokenDomain.version, facilitatorAddress: input.facilitator }
})
