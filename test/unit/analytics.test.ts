// Analytics and reputation pure parts: the platform figures' cache under the TestClock, UTC day windows, reputation
// tiers by the spec's bands and the rating scale.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Ref, TestClock } from "effect"
import { cachedFor } from "../../services/analytics/cache.js"
import { firstDay, utcDay } from "../../services/analytics/Repo.js"
import { ratingDelta, tierOf } from "../../src/domain/Reputation.js"

describe("the platform figures' cache", () => {
  it.effect("computes once per time-to-live and refreshes after it", () =>
    Effect.gen(function* () {
      const computed = yield* Ref.make(0)
      const figures = yield* cachedFor(60_000, Ref.updateAndGet(computed, (n) => n + 1))
      expect(yield* figures).toBe(1)
      yield* TestClock.adjust(59_999)
      expect(yield* figures).toBe(1)
      yield* TestClock.adjust(1)
      expect(yield* figures).toBe(2)
      expect(yield* Ref.get(computed)).toBe(2)
    }))

  it.effect("does not keep a failure", () =>
    Effect.gen(function* () {
      const attempts = yield* Ref.make(0)
      const figures = yield* cachedFor(60_000, Effect.flatMap(Ref.updateAndGet(attempts, (n) => n + 1), (n) => (n === 1 ? Effect.fail("down") : Effect.succeed(n))))
      expect(yield* Effect.flip(figures)).toBe("down")
      expect(yield* figures).toBe(2)
      expect(yield* figures).toBe(2)
    }))

  it.effect("concurrent readers after expiry share one computation", () =>
    Effect.gen(function* () {
      const computed = yield* Ref.make(0)
      const figures = yield* cachedFor(1_000, Ref.updateAndGet(computed, (n) => n + 1))
      const results = yield* Effect.all(Array.from({ length: 10 }, () => figures), { concurrency: "unbounded" })
      expect(new Set(results)).toEqual(new Set([1]))
      expect(yield* Ref.get(computed)).toBe(1)
    }))
})

describe("time windows", () => {
  it("days are UTC calendar days ending today", () => {
    const now = Date.UTC(2026, 2, 1, 0, 30)
    expect(utcDay(now)).toBe("2026-03-01")
    expect(firstDay(now, 1)).toBe("2026-03-01")
    expect(firstDay(now, 2)).toBe("2026-02-28")
    expect(firstDay(now, 90)).toBe("2025-12-02")
  })
})

describe("reputation", () => {
  it("tiers follow the spec's bands", () => {
    expect([100, 90, 89, 70, 69, 50, 49, 40, 39, 0].map(tierOf)).toEqual(
      ["verified", "verified", "excellent", "excellent", "good", "good", "new", "new", "at-risk", "at-risk"]
    )
  })
  it("1-5 stars move the score by -2..+2", () => {
    expect(([1, 2, 3, 4, 5] as const).map(ratingDelta)).toEqual([-2, -1, 0, 1, 2])
  })
})
