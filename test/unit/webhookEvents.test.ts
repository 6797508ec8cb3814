import { describe, expect, it } from "@effect/vitest"
import { matches, unknownEvents, WEBHOOK_EVENTS } from "../../services/webhooks/events.js"

describe("webhook event lists", () => {
  it("`*` matches every event, `chain.*` every chain event, a name only itself", () => {
    for (const event of WEBHOOK_EVENTS) expect(matches(["*"], event)).toBe(true)
    expect(WEBHOOK_EVENTS.filter((e) => matches(["chain.*"], e))).toEqual(WEBHOOK_EVENTS.filter((e) => e.startsWith("chain.")))
    expect(matches(["execution.completed"], "execution.failed")).toBe(false)
    expect(matches(["dispute.opened", "dispute.resolved"], "dispute.resolved")).toBe(true)
  })

  it("only the spec's events and the two wildcards can be subscribed to", () => {
    expect(unknownEvents(["*", "chain.*", ...WEBHOOK_EVENTS])).toEqual([])
    expect(unknownEvents(["execution.*", "execution.exploded", "CHAIN.STARTED", ""])).toEqual(["execution.*", "execution.exploded", "CHAIN.STARTED", ""])
  })
})
