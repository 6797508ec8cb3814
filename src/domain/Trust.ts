// Trust tiers and the settlement policy they give an agent (spec: "not shown"; decided in docs/decisions/trust-tiers.md).
import type { TrustTier } from "./Agent.js"

export interface SettlementPolicy {
  readonly settlementType: "instant" | "delayed"
  /** Human-readable delay ("24h"), null when instant. */
  readonly settlementDelay: string | null
  readonly delayMs: number
}

const HOUR = 60 * 60 * 1000
const DAY = 24 * HOUR

/** The dispute window: a client may dispute a transaction for 24 hours. */
export const DISPUTE_WINDOW_MS = DAY

export const settlementPolicy = (tier: TrustTier): SettlementPolicy => {
  switch (tier) {
    case "premium":
      return { settlementType: "instant", settlementDelay: null, delayMs: 0 }
    case "trusted":
      return { settlementType: "delayed", settlementDelay: "1h", delayMs: HOUR }
    case "new":
      return { settlementType: "delayed", settlementDelay: "24h", delayMs: DISPUTE_WINDOW_MS }
  }
}

export const TRUSTED = { completedExecutions: 100, reputation: 70, ageMs: 7 * DAY } as const
export const PREMIUM = { completedExecutions: 1_000, reputation: 90, ageMs: 30 * DAY } as const

/** The tier an agent has earned; an operator override wins. */
export const earnedTier = (agent: {
  readonly completedExecutions: bigint
  readonly reputationScore: number
  readonly createdAt: Date
  readonly trustTierOverride: TrustTier | null
}, now: number): TrustTier => {
  if (agent.trustTierOverride !== null) return agent.trustTierOverride
  const age = now - agent.createdAt.getTime()
  const meets = (t: { readonly completedExecutions: number; readonly reputation: number; readonly ageMs: number }) =>
    agent.completedExecutions >= BigInt(t.completedExecutions) && agent.reputationScore >= t.reputation && age >= t.ageMs
  if (meets(PREMIUM)) return "premium"
  if (meets(TRUSTED)) return "trusted"
  return "new"
}
