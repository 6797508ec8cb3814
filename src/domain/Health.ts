// Health bands (spec section 2, "Health score"): the name shown beside health_score (0-1.0).
import { Schema } from "effect"

export const HealthBand = Schema.Literal("excellent", "good", "degraded", "poor").annotations({
  description: "health_score's band: excellent at least 0.8; good 0.5 up to 0.8; degraded 0.2 up to 0.5; poor below 0.2"
})
export type HealthBand = typeof HealthBand.Type

/**
 * Spec: at least 0.8 excellent; 0.5-0.79 good; 0.2-0.49 degraded; below 0.2 poor. The score is a moving average, not a
 * two-decimal number, so each band runs from its lower bound up to the next one (0.795 is good, 0.495 degraded).
 */
export const healthBandOf = (score: number): HealthBand =>
  score >= 0.8 ? "excellent" : score >= 0.5 ? "good" : score >= 0.2 ? "degraded" : "poor"
