// The fold of execution outcomes into an agent's standing: step-by-step clamping, the health EMA, the counters, and
// the events only root executions write.
import { describe, expect, it } from "vitest"
import { fold, nextHealth, type Outcome } from "../../services/reputation/folding.js"

const at = new Date("2026-01-01T00:00:00Z")
const outcome = (success: boolean, scored = true): Outcome => ({ executionId: `req_${Math.random()}`, scored, success, at })
const start = { reputationScore: 50, healthScore: 1, completedExecutions: 0n, failedExecutions: 0n }

describe("reputation fold", () => {
  it("clamps at each step, so a success after reaching 100 is a 0 delta and a failure still costs 2", () => {
    const result = fold({ ...start, reputationScore: 99 }, [outcome(true), outcome(true), outcome(false)])
    expect(result.events.map((e) => [e.eventType, e.scoreDelta, e.scoreAfter])).toEqual([
      ["transaction_success", 1, 100],
      ["transaction_success", 0, 100],
      ["transaction_fail", -2, 98]
    ])
    expect(result.standing).toMatchObject({ reputationScore: 98, completedExecutions: 2n, failedExecutions: 1n })
  })

  it("a failure at 1 is clamped to 0 (delta -1)", () => {
    const result = fold({ ...start, reputationScore: 1 }, [outcome(false)])
    expect(result.events[0]).toMatchObject({ scoreDelta: -1, scoreAfter: 0 })
  })

  it("chained sub-calls move health and the counters, never reputation, and write no event", () => {
    const result = fold(start, [outcome(false, false), outcome(true, false)])
    expect(result.events).toEqual([])
    expect(result.standing.reputationScore).toBe(50)
    expect(result.standing.healthScore).toBeCloseTo(nextHealth(nextHealth(1, false), true), 12)
    expect(result.standing).toMatchObject({ completedExecutions: 1n, failedExecutions: 1n })
    expect(result.healthUpdatedAt).toEqual(at)
  })

  it("health is the same EMA, outcome by outcome, as one update per call gave", () => {
    let health = 1
    for (const ok of [false, false, true, false, false]) health = 0.1 * (ok ? 1 : 0) + 0.9 * health
    const result = fold(start, [false, false, true, false, false].map((ok) => outcome(ok)))
    expect(result.standing.healthScore).toBe(health)
  })

  it("nothing to fold leaves the standing as it was", () => {
    expect(fold(start, [])).toEqual({ standing: start, healthUpdatedAt: null, events: [] })
  })
})
