// The one pricing function (src/domain/Pricing.ts): the maximum a capability authorises, the charge for the units used
// (rounded up to the micro-USDC, capped at the maximum or the quote), and the limits registration requires.
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { Capabilities } from "../../src/domain/Agent.js"
import { agentFeeFor, chargeFor, maxPriceOf, meterOf, type PricingTerms, pricingIssues, unitsOfDuration } from "../../src/domain/Pricing.js"
import { parseUsage } from "../../services/executions/metering.js"
import { readQuote } from "../../services/executions/quote.js"

const perToken: PricingTerms = { model: "per-token", basePrice: 2_000n, maxTokens: 10_000 } // 0.002 per 1,000 tokens
const perSecond: PricingTerms = { model: "per-minute", basePrice: 1_000n, maxDurationSeconds: 3, per: "second" }
const perMinute: PricingTerms = { model: "per-minute", basePrice: 6_000n, maxDurationSeconds: 90 }
const dynamic: PricingTerms = { model: "dynamic", basePrice: 10_000n, maxPrice: 50_000n }

describe("pricing: the maximum a call may cost (the 402's amount)", () => {
  it("per-token: price per 1,000 × maxTokens / 1,000 + the platform fee", () => {
    expect(maxPriceOf(perToken)).toBe(1_000n + 20_000n)
  })
  it("per-minute: per started interval; 90 s at per-minute pricing is 2 minutes", () => {
    expect(maxPriceOf(perSecond)).toBe(1_000n + 3_000n)
    expect(meterOf(perMinute).maxUnits).toBe(2n)
    expect(maxPriceOf(perMinute)).toBe(1_000n + 12_000n)
  })
  it("dynamic: maxPrice; per-request and metered capabilities stored without a maximum: basePrice", () => {
    expect(maxPriceOf(dynamic)).toBe(51_000n)
    expect(maxPriceOf({ model: "per-request", basePrice: 10_000n })).toBe(11_000n)
    expect(maxPriceOf({ model: "per-token", basePrice: 10_000n })).toBe(11_000n)
    expect(meterOf({ model: "per-minute", basePrice: 10_000n }).unit).toBe("call")
  })
})

describe("pricing: the charge for what was used", () => {
  const authorized = maxPriceOf(perToken)
  it("no usage: the platform fee only, the rest returned", () => {
    const c = chargeFor(meterOf(perToken), 0n, authorized)
    expect(c).toMatchObject({ unitsUsed: 0n, agentFee: 0n, charged: 1_000n, returned: 20_000n, capped: false })
  })
  it("some usage, rounded UP to the micro-USDC; the 85/15 split of the agent fee", () => {
    // 1 token at 0.002 per 1,000 = 0.000002 exactly; at 0.0015 per 1,000: 1.5 micro → 2, 3 tokens 4.5 → 5.
    expect(agentFeeFor(meterOf(perToken), 1n)).toBe(2n)
    const cheaper = meterOf({ model: "per-token", basePrice: 1_500n, maxTokens: 100 })
    expect(agentFeeFor(cheaper, 1n)).toBe(2n)
    expect(chargeFor(cheaper, 3n, maxPriceOf({ model: "per-token", basePrice: 1_500n, maxTokens: 100 })).agentFee).toBe(5n)
    const some = chargeFor(meterOf(perToken), 2_500n, authorized)
    expect(some).toMatchObject({ agentFee: 5_000n, platformCut: 750n, agentEarnings: 4_250n, charged: 6_000n, returned: 15_000n })
    expect(some.charged + some.returned).toBe(authorized)
  })
  it("usage over the maximum is cut to it and flagged; never more than authorised", () => {
    const c = chargeFor(meterOf(perToken), 50_000n, authorized)
    expect(c).toMatchObject({ unitsUsed: 10_000n, capped: true, charged: authorized, returned: 0n })
    expect(chargeFor(meterOf(perToken), -5n, authorized).unitsUsed).toBe(0n)
  })
  it("agent time: started seconds or minutes of the measured duration", () => {
    expect(unitsOfDuration(meterOf(perSecond), 0)).toBe(0n)
    expect(unitsOfDuration(meterOf(perSecond), 1)).toBe(1n)
    expect(unitsOfDuration(meterOf(perSecond), 1_000)).toBe(1n)
    expect(unitsOfDuration(meterOf(perSecond), 1_001)).toBe(2n)
    expect(unitsOfDuration(meterOf(perMinute), 60_001)).toBe(2n)
    const c = chargeFor(meterOf(perSecond), unitsOfDuration(meterOf(perSecond), 4_200), maxPriceOf(perSecond))
    expect(c).toMatchObject({ unitsUsed: 3n, capped: true, returned: 0n })
  })
  it("dynamic: the quote caps the units (micro-USDC of agent fee)", () => {
    const max = maxPriceOf(dynamic)
    expect(chargeFor(meterOf(dynamic), 10_000n, max, 30_000n)).toMatchObject({ agentFee: 10_000n, charged: 11_000n, returned: 40_000n, capped: false })
    expect(chargeFor(meterOf(dynamic), 45_000n, max, 30_000n)).toMatchObject({ agentFee: 30_000n, capped: true, returned: 20_000n })
    expect(chargeFor(meterOf(dynamic), 60_000n, max)).toMatchObject({ agentFee: 50_000n, capped: true, returned: 0n })
  })
})

describe("pricing: registration's limits", () => {
  it("a metered capability without its maximum is refused, with the field named", () => {
    expect(pricingIssues({ model: "per-token", basePrice: 1_000n }).map((i) => i.path)).toEqual(["maxTokens"])
    expect(pricingIssues({ model: "per-minute", basePrice: 1_000n }).map((i) => i.path)).toEqual(["maxDurationSeconds"])
    expect(pricingIssues({ model: "dynamic", basePrice: 1_000n }).map((i) => i.path)).toEqual(["maxPrice"])
    expect(pricingIssues({ model: "per-request", basePrice: 1_000n, maxTokens: 5 }).map((i) => i.path)).toEqual(["maxTokens"])
    expect(pricingIssues(perToken)).toEqual([])
    expect(pricingIssues({ model: "per-token", basePrice: 10_000n * 1_000_000n, maxTokens: 2_000 })[0]?.path).toBe("basePrice")
  })
  it("the request schema refuses it with a path into the capability", () => {
    const cap = (pricing: Record<string, unknown>) => ({ id: "c", name: "C", description: "", pricing: { currency: "USDC", ...pricing } })
    const decode = Schema.decodeUnknownEither(Capabilities)
    const refused = decode([cap({ model: "per-token", basePrice: "0.002" })])
    expect(refused._tag).toBe("Left")
    expect(String(refused._tag === "Left" ? refused.left.message : "")).toContain("maxTokens")
    expect(decode([cap({ model: "per-token", basePrice: "0.002", maxTokens: 1000 })])._tag).toBe("Right")
    expect(decode([cap({ model: "dynamic", basePrice: "0.01", maxPrice: "0.05" })])._tag).toBe("Right")
  })
})

describe("usage reports and quotes as agents send them", () => {
  it("X-Usage-Units: digits only; too long counts as over any maximum; anything else as none", () => {
    expect(parseUsage("1234")).toBe(1_234n)
    expect(parseUsage(" 7 ")).toBe(7n)
    expect(parseUsage("1".repeat(40))).toBe("over")
    expect(parseUsage("-3")).toBeUndefined()
    expect(parseUsage("1e3")).toBeUndefined()
    expect(parseUsage(undefined)).toBeUndefined()
  })
  it("a quote: {price} in USDC within maxPrice", () => {
    expect(readQuote({ price: "0.03" }, 50_000n)).toEqual({ price: 30_000n })
    expect("problem" in readQuote({ price: "0.06" }, 50_000n)).toBe(true)
    expect("problem" in readQuote({ price: 0.03 }, 50_000n)).toBe(true)
    expect("problem" in readQuote({ price: "0.01", pad: "x".repeat(5_000) }, 50_000n)).toBe(true)
  })
})
