// How a capability is priced (docs/agent-requests.md, "Metered pricing"): flat per call, per 1,000 tokens the agent
// reports, per started minute or second the marketplace measures, or a dynamic price the agent quotes before payment.
// Each metered model declares its limit, which is what the payer authorises and the most a call may cost.

/** A flat price per call, in USDC (the client pays this plus the platform's 0.001). */
export interface PerRequestPricing {
  readonly model: "per-request"
  readonly price: string
}

/** USDC per 1,000 tokens; the handler reports the tokens it used with `ctx.reportUsage(tokens)`. */
export interface PerTokenPricing {
  readonly model: "per-token"
  readonly pricePer1000Tokens: string
  /** The most tokens one call may use (1 to 100,000,000): the payer authorises this many. */
  readonly maxTokens: number
}

/** USDC per started minute (or second) of the call, measured by the marketplace; nothing to report. */
export interface PerMinutePricing {
  readonly model: "per-minute"
  readonly price: string
  readonly per?: "minute" | "second"
  /** The longest one call may run, in seconds (1 to 3600). */
  readonly maxDurationSeconds: number
}

/** A price the agent quotes per request before the payer pays, at most `maxPrice` (USDC). */
export interface DynamicPricing {
  readonly model: "dynamic"
  readonly maxPrice: string
  /** The price shown in discovery (default: `maxPrice`). */
  readonly displayPrice?: string
  /**
   * Answers a quote: the agent fee in USDC for this input (at most `maxPrice`). Do no work here: the marketplace asks
   * before the payer pays, with at most 5 s to answer. Optionally report a lower final charge with `ctx.reportUsage`
   * (micro-USDC of agent fee) from the handler; without it the call charges the quote.
   * (A method signature, so a quote declaring a narrower input type is accepted.)
   */
  quote(input: Record<string, unknown>): string | Promise<string>
}

export type Pricing = PerRequestPricing | PerTokenPricing | PerMinutePricing | DynamicPricing

/** Which models expect the handler to report usage, and what a missing report costs the agent. */
export const usageExpected = (pricing: Pricing): string | undefined =>
  pricing.model === "per-token" ? "the call charges 0 tokens: the payer pays only the platform fee" : undefined

/** The registration's `pricing` object (the wire format of `POST /api/v1/agents`). */
export const pricingWire = (pricing: Pricing) => {
  switch (pricing.model) {
    case "per-request":
      return { model: "per-request", basePrice: pricing.price, currency: "USDC" }
    case "per-token":
      return { model: "per-token", basePrice: pricing.pricePer1000Tokens, currency: "USDC", maxTokens: pricing.maxTokens }
    case "per-minute":
      return { model: "per-minute", basePrice: pricing.price, currency: "USDC", maxDurationSeconds: pricing.maxDurationSeconds, ...(pricing.per === undefined ? {} : { per: pricing.per }) }
    case "dynamic":
      return { model: "dynamic", basePrice: pricing.displayPrice ?? pricing.maxPrice, currency: "USDC", maxPrice: pricing.maxPrice }
  }
}

/** Usage reported by a handler: a non-negative integer (tokens, or micro-USDC of agent fee for `dynamic`). */
export const usageHeader = (units: number | bigint): string => {
  const value = typeof units === "bigint" ? units : Number.isSafeInteger(units) && units >= 0 ? BigInt(units) : -1n
  if (value < 0n) throw new RangeError(`usage must be a non-negative integer, got ${String(units)}`)
  return value.toString()
}
