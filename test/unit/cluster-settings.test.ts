// WEB_CONCURRENCY's validation and the primary's restart budget (when dead workers stop being replaced).
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import { restartBudget } from "../../src/cluster/restartBudget.js"
import { webConcurrency } from "../../src/cluster/settings.js"

const read = (env: Record<string, string>) =>
  Effect.runSync(Effect.either(Effect.withConfigProvider(webConcurrency, ConfigProvider.fromMap(new Map(Object.entries(env))))))

describe("WEB_CONCURRENCY", () => {
  it("defaults to 1 (one process, no primary) and accepts 1..16", () => {
    expect(read({})).toEqual(Either.right(1))
    expect(read({ WEB_CONCURRENCY: "2" })).toEqual(Either.right(2))
    expect(read({ WEB_CONCURRENCY: "16" })).toEqual(Either.right(16))
  })

  it("refuses 0, 17, fractions and words with one message naming the setting and the range", () => {
    for (const value of ["0", "17", "1.5", "two", "", "-1"]) {
      const result = read({ WEB_CONCURRENCY: value })
      expect(Either.isLeft(result)).toBe(true)
      if (Either.isLeft(result)) expect(String(result.left)).toContain("WEB_CONCURRENCY must be a whole number from 1 to 16")
    }
  })
})

describe("the restart budget", () => {
  it("replaces up to 5 dead workers within a minute and refuses the sixth", () => {
    const budget = restartBudget(5, 60_000)
    expect([0, 1_000, 2_000, 3_000, 4_000].map((t) => budget.allow(t))).toEqual([true, true, true, true, true])
    expect(budget.allow(5_000)).toBe(false)
    expect(budget.recent()).toBe(6)
  })

  it("forgets exits older than the window: a worker dying now and then is always replaced", () => {
    const budget = restartBudget(5, 60_000)
    for (let hour = 0; hour < 24; hour++) expect(budget.allow(hour * 3_600_000)).toBe(true)
    expect(budget.recent()).toBe(1)
  })
})
