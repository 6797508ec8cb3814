// The one place a paid call's price is computed: what a capability charges per call, and the price the payer pays
// (the platform fee on top). The 402 challenge, the escrow, the chain budget checks and the discovery listings all ask here.
import type { Capability } from "./Agent.js"
import { EXECUTION_PLATFORM_FEE } from "./Money.js"

/** The price of a call: the platform fee plus the capability's price (the agent's fee). */
export const priceOf = (agentFee: bigint) => EXECUTION_PLATFORM_FEE + agentFee

/** What one call of `capability` costs: the agent's fee (its `basePrice`, whatever its pricing model) and the price. */
export const quoteOf = (capability: Pick<Capability, "pricing">) => {
  const agentFee = capability.pricing.basePrice
  return { agentFee, price: priceOf(agentFee) } as const
}
