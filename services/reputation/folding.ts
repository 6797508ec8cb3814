// Pure: an agent's standing after a run of execution outcomes (reputation +1/-2 clamped to 0-100 at each step, the
// health EMA, the outcome counters) and the reputation events those outcomes write, in the order they happened.

/** Weight of the newest outcome in the health EMA: health = α·outcome + (1-α)·health. */
export const HEALTH_ALPHA = 0.1
export const REPUTATION_SUCCESS = 1
export const REPUTATION_FAILURE = -2

/** One recorded outcome: `scored` for a root execution (moves reputation), not for a chained sub-call (health only). */
export interface Outcome {
  readonly executionId: string
  readonly scored: boolean
  readonly success: boolean
  readonly at: Date
}

export interface Standing {
  readonly reputationScore: number
  readonly healthScore: number
  readonly completedExecutions: bigint
  readonly failedExecutions: bigint
}

export interface ReputationEventRow {
  readonly executionId: string
  readonly eventType: "transaction_success" | "transaction_fail"
  /** The effective change (clamped at 0 and 100). */
  readonly scoreDelta: number
  readonly scoreAfter: number
  readonly at: Date
}

/** The health EMA after one outcome or probe. */
export const nextHealth = (health: number, healthy: boolean): number => HEALTH_ALPHA * (healthy ? 1 : 0) + (1 - HEALTH_ALPHA) * health

/** Applies `outcomes` in order. */
export const fold = (start: Standing, outcomes: ReadonlyArray<Outcome>) => {
  let reputationScore = start.reputationScore
  let healthScore = start.healthScore
  let completedExecutions = start.completedExecutions
  let failedExecutions = start.failedExecutions
  let healthUpdatedAt: Date | null = null
  const events: Array<ReputationEventRow> = []
  for (const o of outcomes) {
    healthScore = nextHealth(healthScore, o.success)
    healthUpdatedAt = o.at
    if (o.success) completedExecutions++
    else failedExecutions++
    if (!o.scored) continue
    const after = Math.min(100, Math.max(0, reputationScore + (o.success ? REPUTATION_SUCCESS : REPUTATION_FAILURE)))
    events.push({
      executionId: o.executionId,
      eventType: o.success ? "transaction_success" : "transaction_fail",
      scoreDelta: after - reputationScore,
      scoreAfter: after,
      at: o.at
    })
    reputationScore = after
  }
  return { standing: { reputationScore, healthScore, completedExecutions, failedExecutions }, healthUpdatedAt, events }
}
