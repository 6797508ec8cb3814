// The hard deadline terminates synchronous work wherever it is, and leaves the caller able to go on.
import { describe, expect, it } from "vitest"
import { withinDeadline } from "../../services/agents/hardDeadline.js"

describe("withinDeadline", () => {
  it("returns what finished in time, terminates what did not, and passes other errors through", () => {
    expect(withinDeadline(1_000, () => 42)).toEqual({ _tag: "Done", value: 42 })
    let spins = 0
    expect(withinDeadline(20, () => {
      for (;;) spins++
    })).toEqual({ _tag: "Overrun" })
    expect(spins).toBeGreaterThan(0)
    expect(() => withinDeadline(1_000, () => { throw new RangeError("deep") })).toThrow(RangeError)
    expect(withinDeadline(1_000, () => "after")).toEqual({ _tag: "Done", value: "after" })
  })
})
