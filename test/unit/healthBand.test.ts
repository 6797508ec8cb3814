// Health bands beside health_score (spec section 2): at least 0.8 excellent; 0.5-0.79 good; 0.2-0.49 degraded; below
// 0.2 poor; each band runs up to the next one's lower bound.
import { describe, expect, it } from "@effect/vitest"
import { healthBandOf } from "../../src/domain/Health.js"

describe("health bands", () => {
  it.each([
    [1, "excellent"],
    [0.8, "excellent"],
    [0.7999, "good"],
    [0.795, "good"],
    [0.5, "good"],
    [0.4999, "degraded"],
    [0.2, "degraded"],
    [0.1999, "poor"],
    [0, "poor"]
  ] as const)("a health_score of %s is %s", (score, band) => {
    expect(healthBandOf(score)).toBe(band)
  })
})
