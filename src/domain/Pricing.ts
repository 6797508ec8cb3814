// The one place a call's price is computed: what a capability may charge at most (the 402's amount) and what it charges
// for the units it used (docs/agent-requests.md "Metered pricing"). Pure; money is bigint micro-USDC.
import type { Capability } from "./Agent.js"
import { EXECUTION_PLATFORM_FEE, MAX_BASE_PRICE, splitAgentFee } from "./Money.js"

/** What pricing says, as stored (metered limits optional here: capabilities stored before they existed lack them). */
export interface PricingTerms {
  readonly model: "per-request" | "per-token" | "per-minute" | "dynamic"
  /** per-request: the price; per-token: per 1,000 tokens; per-minute: per started `per` interval; dynamic: informative. */
  readonly basePrice: bigint
  readonly maxTokens?: number | undefined
  readonly maxDurationSeconds?: number | undefined
  /** per-minute only: the interval a started one of which is charged (default minute). */
  readonly per?: "second" | "minute" | undefined
  /** dynamic only: the most the agent's quote may ask (agent fee, micro-USDC). */
  readonly maxPrice?: bigint | undefined
}

/** How a capability meters: the unit, the price of one unit in micro-USDC (per 1,000 for tokens), the most units. */
export interface Meter {
  readonly unit: "call" | "token" | "second" | "minute" | "micro-usdc"
  /** Micro-USDC per unit; for `token`, per 1,000 tokens (`perThousand`). */
  readonly unitPrice: bigint
  readonly perThousand: boolean
  readonly maxUnits: bigint
}

export const TOKENS_PER_PRICE = 1_000n

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b

/**
 * The meter of a capability. A metered capability stored without its maximum (registered before limits existed) is
 * charged as per-request (its basePrice per call), as it always was.
 */
export const meterOf = (p: PricingTerms): Meter => {
  if (p.model === "per-token" && p.maxTokens !== undefined) {
    return { unit: "token", unitPrice: p.basePrice, perThousand: true, maxUnits: BigInt(p.maxTokens) }
  }
  if (p.model === "per-minute" && p.maxDurationSeconds !== undefined) {
    const per = p.per ?? "minute"
    const seconds = BigInt(p.maxDurationSeconds)
    return { unit: per, unitPrice: p.basePrice, perThousand: false, maxUnits: per === "second" ? seconds : ceilDiv(seconds, 60n) }
  }
  if (p.model === "dynamic" && p.maxPrice !== undefined) return { unit: "micro-usdc", unitPrice: 1n, perThousand: false, maxUnits: p.maxPrice }
  return { unit: "call", unitPrice: p.basePrice, perThousand: false, maxUnits: 1n }
}

export const isMetered = (p: PricingTerms) => meterOf(p).unit !== "call"

/** The agent fee for `units` (rounded up to the micro-USDC: a started thousand tokens' fraction is charged, never lost). */
export const agentFeeFor = (meter: Meter, units: bigint): bigint =>
  meter.perThousand ? ceilDiv(units * meter.unitPrice, TOKENS_PER_PRICE) : units * meter.unitPrice

/** The most a call may cost the agent side, and with the platform fee: the payment's (the 402's) amount. */
export const maxAgentFee = (p: PricingTerms): bigint => agentFeeFor(meterOf(p), meterOf(p).maxUnits)
export const maxPriceOf = (p: PricingTerms): bigint => priceOf(maxAgentFee(p))

/** The price of a call: the platform fee plus the agent's fee. */
export const priceOf = (agentFee: bigint) => EXECUTION_PLATFORM_FEE + agentFee

/**
 * What one call of `capability` costs up front, by who funds it: an x402 payment pays the maximum (a metered call gives
 * back what it did not use); a chain's budget pays the flat `basePrice` per call (chains are not metered: docs/decisions/metered-pricing-and-quotes.md).
 */
export const quoteOf = (capability: Pick<Capability, "pricing">, funding: "x402" | "chain" = "x402") => {
  const agentFee = funding === "x402" ? maxAgentFee(capability.pricing) : capability.pricing.basePrice
  return { agentFee, price: priceOf(agentFee) } as const
}

/** Units of agent time: started seconds or minutes of `durationMs` (0 ms is 0 units). */
export const unitsOfDuration = (meter: Meter, durationMs: number): bigint => {
  const ms = BigInt(Math.max(0, Math.ceil(durationMs)))
  return ceilDiv(ms, meter.unit === "second" ? 1_000n : 60_000n)
}

/** What one completed call costs. Invariants: `charged + returned = authorized`; `charged ≤ authorized`. */
export interface Charge {
  readonly unit: Meter["unit"]
  readonly unitsUsed: bigint
  readonly unitPrice: bigint
  /** Usage above the cap (reported or measured) was cut to the cap. */
  readonly capped: boolean
  readonly agentFee: bigint
  readonly platformFee: bigint
  readonly platformCut: bigint
  readonly agentEarnings: bigint
  readonly authorized: bigint
  readonly charged: bigint
  readonly returned: bigint
}

/**
 * THE pricing function: the charge of a completed call from its capability's meter (`meterOf`), the units it used, the amount the
 * payment authorised, and (dynamic) the quote accepted before payment, which caps the units. Units below zero count as
 * zero; above the cap they are cut to the cap and flagged. The platform fee is charged for every completed call.
 */
export const chargeFor = (meter: Meter, used: bigint, authorized: bigint, quote?: bigint): Charge => {
  const cap = meter.unit === "micro-usdc" && quote !== undefined && quote < meter.maxUnits ? quote : meter.maxUnits
  const nonNegative = used < 0n ? 0n : used
  const capped = nonNegative > cap
  const unitsUsed = capped ? cap : nonNegative
  const agentFee = agentFeeFor(meter, unitsUsed)
  const { platformCut, agentEarnings } = splitAgentFee(agentFee)
  const charged = EXECUTION_PLATFORM_FEE + agentFee
  // The payment authorised at least the maximum; never charge more than it (a defensive bound, not a path).
  const bounded = charged > authorized ? authorized : charged
  return {
    unit: meter.unit,
    unitsUsed,
    unitPrice: meter.unitPrice,
    capped,
    agentFee,
    platformFee: EXECUTION_PLATFORM_FEE,
    platformCut,
    agentEarnings,
    authorized,
    charged: bounded,
    returned: authorized - bounded
  }
}

/** Bounds of the limits (registration refuses others). */
export const MAX_TOKENS_LIMIT = 100_000_000
export const MAX_DURATION_SECONDS_LIMIT = 3_600

/** Why a capability's pricing cannot be accepted at registration or update (empty: fine). Paths are under `pricing`. */
export const pricingIssues = (p: PricingTerms): ReadonlyArray<{ readonly path: string; readonly message: string }> => {
  const issues: Array<{ path: string; message: string }> = []
  if (p.model === "per-token" && p.maxTokens === undefined) issues.push({ path: "maxTokens", message: "a per-token capability must declare maxTokens (the most tokens one call may use)" })
  if (p.model === "per-minute" && p.maxDurationSeconds === undefined) {
    issues.push({ path: "maxDurationSeconds", message: "a per-minute capability must declare maxDurationSeconds (the longest one call may run)" })
  }
  if (p.model === "dynamic" && p.maxPrice === undefined) issues.push({ path: "maxPrice", message: "a dynamic capability must declare maxPrice (the most its quote may ask)" })
  if (p.maxTokens !== undefined && p.model !== "per-token") issues.push({ path: "maxTokens", message: "maxTokens is only for per-token pricing" })
  if ((p.maxDurationSeconds !== undefined || p.per !== undefined) && p.model !== "per-minute") {
    issues.push({ path: p.per !== undefined ? "per" : "maxDurationSeconds", message: "maxDurationSeconds and per are only for per-minute pricing" })
  }
  if (p.maxPrice !== undefined && p.model !== "dynamic") issues.push({ path: "maxPrice", message: "maxPrice is only for dynamic pricing" })
  if (issues.length === 0 && maxAgentFee(p) > MAX_BASE_PRICE) {
    issues.push({ path: "basePrice", message: "the most one call may cost (price × maximum) must be at most 10000" })
  }
  return issues
}
