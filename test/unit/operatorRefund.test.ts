// The execution machine's OPERATOR_REFUND: taken only by held money while the agent is suspended (the frozen fact), it
// cancels the pending release and enters the refund path (startRefund); anywhere else it changes nothing.
import { describe, expect, it } from "@effect/vitest"
import { executionMachine, executionStatus } from "../../machines/execution.js"
import { actionsOf, type PersistedSnapshot, startMachine, stepMachine } from "../../machines/step.js"

const T0 = 1_700_000_000_000
const decision = { type: "OPERATOR_REFUND", at: T0 + 1_000, by: "alice", reason: "fraud confirmed" } as const

const withFrozen = (persisted: PersistedSnapshot, frozen: boolean): PersistedSnapshot => {
  const context = persisted.context
  return JSON.parse(JSON.stringify({ value: persisted.value, context: typeof context === "object" && context !== null ? { ...context, frozen } : context }))
}

describe("execution machine: an operator refund of frozen money", () => {
  const running = startMachine(executionMachine, { retryWindowMs: 600_000, deadlineMs: 90_000, startedAt: T0 }).persisted
  const settled = stepMachine(executionMachine, running, { type: "PAYMENT_SETTLED", at: T0 + 5 }).persisted
  const held = stepMachine(executionMachine, settled, { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 3_600_000 })

  it("held money of a suspended agent goes to the refund path: the release timer cancelled, the refund started once", () => {
    const refunding = stepMachine(executionMachine, withFrozen(held.persisted, true), decision)
    expect(refunding.state).toBe("refunding")
    expect(refunding.actions.map((a) => a.type)).toEqual(["cancelTimer", "startRefund"])
    expect(actionsOf(refunding, "cancelTimer")).toEqual([{ event: "RELEASE_DUE" }])
    expect(executionStatus(refunding.state, refunding.snapshot.context)).toBe("completed")
    // Again, or the release falling due meanwhile: nothing.
    expect(stepMachine(executionMachine, withFrozen(refunding.persisted, true), decision).changed).toBe(false)
    expect(stepMachine(executionMachine, withFrozen(refunding.persisted, false), { type: "RELEASE_DUE", at: T0 + 3_600_010 }).changed).toBe(false)
    const refunded = stepMachine(executionMachine, refunding.persisted, { type: "REFUND_CONFIRMED", at: T0 + 2_000, txHash: "0xabc" })
    expect(refunded.state).toBe("refunded")
    expect(executionStatus(refunded.state, refunded.snapshot.context)).toBe("refunded")
  })

  it("is refused while the agent is not suspended, before the money is held, and once it was released", () => {
    expect(stepMachine(executionMachine, withFrozen(held.persisted, false), decision).changed).toBe(false)
    expect(stepMachine(executionMachine, withFrozen(running, true), decision).changed).toBe(false)
    const awaiting = stepMachine(executionMachine, withFrozen(running, true), { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 0 })
    expect(awaiting.state).toBe("completed.awaitingPayment")
    expect(stepMachine(executionMachine, withFrozen(awaiting.persisted, true), decision).changed).toBe(false)
    const released = stepMachine(executionMachine, held.persisted, { type: "RELEASE_DUE", at: T0 + 3_600_010 })
    expect(released.state).toBe("completed.released")
    expect(stepMachine(executionMachine, withFrozen(released.persisted, true), decision).changed).toBe(false)
  })
})
