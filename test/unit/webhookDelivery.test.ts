// The delivery machine (webhooks and execution callbacks), stepped purely as the host does: retries, dead letter, superseded.
import { describe, expect, it } from "@effect/vitest"
import { actionsOf, startMachine, stepMachine } from "../../machines/step.js"
import { deliveryMachine, type DeliveryContext } from "../../machines/webhookDelivery.js"

const T0 = 1_800_000_000_000
const fail = (at: number) => ({ type: "ATTEMPT_FAILED", at, status: 500, error: "the receiver answered 500" }) as const

describe("delivery machine", () => {
  it("retries after 1 s, 2 s, 4 s and 5 min, and the 5th failure is dead with its dead-letter action", () => {
    let persisted = startMachine(deliveryMachine, {}).persisted
    const waits: Array<number> = []
    let at = T0
    for (let attempt = 1; attempt <= 4; attempt++) {
      const step = stepMachine(deliveryMachine, persisted, fail(at))
      expect(step.state).toBe("pending")
      const next = (step.snapshot.context as DeliveryContext).nextAttemptAt ?? 0
      waits.push(next - at)
      at = next
      persisted = step.persisted
    }
    expect(waits).toEqual([1_000, 2_000, 4_000, 300_000])
    const last = stepMachine(deliveryMachine, persisted, fail(at))
    expect(last.state).toBe("dead")
    expect(actionsOf(last, "deadLetter")).toHaveLength(1)
    expect((last.snapshot.context as DeliveryContext).attempts).toBe(5)
  })

  it("a pending post is superseded by a newer one (no outcome counted); a delivered or dead one is not", () => {
    const pending = stepMachine(deliveryMachine, startMachine(deliveryMachine, {}).persisted, fail(T0))
    const superseded = stepMachine(deliveryMachine, pending.persisted, { type: "SUPERSEDED", at: T0 + 500, by: "del_newer" })
    expect(superseded.state).toBe("superseded")
    expect(superseded.actions).toEqual([])
    expect(stepMachine(deliveryMachine, superseded.persisted, { type: "DELIVERED", at: T0 + 600, status: 200 }).changed).toBe(false)
    const delivered = stepMachine(deliveryMachine, startMachine(deliveryMachine, {}).persisted, { type: "DELIVERED", at: T0, status: 204 })
    expect(stepMachine(deliveryMachine, delivered.persisted, { type: "SUPERSEDED", at: T0 + 1, by: "del_newer" }).changed).toBe(false)
  })
})
