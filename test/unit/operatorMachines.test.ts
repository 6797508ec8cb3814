// The machines' operator events: a forced circuit, a settlement retried now, a suspended agent's frozen escrow and its
// reinstatement, a refund retried now (pure steps, persisted as JSON between them as the host does).
import { describe, expect, it } from "@effect/vitest"
import { circuitMachine } from "../../machines/circuit.js"
import { executionMachine } from "../../machines/execution.js"
import { settlementMachine } from "../../machines/settlement.js"
import { actionsOf, type PersistedSnapshot, startMachine, stepMachine } from "../../machines/step.js"

const T0 = 1_700_000_000_000
const by = { by: "alice", reason: "incident 42" }

/** A stored snapshot with some context fields replaced (the facts a host merges in, or a state reached earlier). */
const withContext = (persisted: PersistedSnapshot, fields: Record<string, unknown>): PersistedSnapshot => {
  const context = persisted.context
  return JSON.parse(JSON.stringify({ value: persisted.value, context: typeof context === "object" && context !== null ? { ...context, ...fields } : context }))
}

describe("circuit machine: operator levers", () => {
  const closed = startMachine(circuitMachine, { resetTimeoutMs: 30_000 }).persisted

  it("a forced-open circuit ignores its probe timer and successes elsewhere until an operator closes it", () => {
    const forced = stepMachine(circuitMachine, closed, { type: "FORCE_OPEN", at: T0, ...by })
    expect(forced.state).toBe("open")
    expect(forced.snapshot.context).toMatchObject({ forced: true, openedAt: T0, trips: 1 })
    expect(actionsOf(forced, "circuitChanged")).toEqual([{ state: "open" }])
    expect(stepMachine(circuitMachine, forced.persisted, { type: "PROBE", at: T0 + 60_000 }).changed).toBe(false)
    expect(stepMachine(circuitMachine, forced.persisted, { type: "RESET", at: T0 + 60_000 }).changed).toBe(false)
    expect(stepMachine(circuitMachine, forced.persisted, { type: "FORCE_OPEN", at: T0 + 1, ...by }).changed).toBe(false)

    const closedAgain = stepMachine(circuitMachine, forced.persisted, { type: "FORCE_CLOSE", at: T0 + 2, ...by })
    expect(closedAgain.state).toBe("closed")
    expect(closedAgain.snapshot.context).toMatchObject({ forced: false, openedAt: null, retryAt: null })
    expect(actionsOf(closedAgain, "circuitChanged")).toEqual([{ state: "closed" }])
    // Closed again, it trips and probes as before.
    const tripped = stepMachine(circuitMachine, closedAgain.persisted, { type: "TRIP", at: T0 + 10 })
    expect(stepMachine(circuitMachine, tripped.persisted, { type: "PROBE", at: T0 + 10 + 30_000 }).state).toBe("half-open")
  })

  it("an open circuit (tripped by failures) can be held open, or closed at once; a closed one takes no FORCE_CLOSE", () => {
    const tripped = stepMachine(circuitMachine, closed, { type: "TRIP", at: T0 })
    const held = stepMachine(circuitMachine, tripped.persisted, { type: "FORCE_OPEN", at: T0 + 1, ...by })
    expect(held.state).toBe("open")
    expect(held.snapshot.context).toMatchObject({ forced: true, trips: 1 })
    expect(stepMachine(circuitMachine, held.persisted, { type: "PROBE", at: T0 + 30_000 }).changed).toBe(false)
    expect(stepMachine(circuitMachine, tripped.persisted, { type: "FORCE_CLOSE", at: T0 + 1, ...by }).state).toBe("closed")
    expect(stepMachine(circuitMachine, closed, { type: "FORCE_CLOSE", at: T0, ...by }).changed).toBe(false)
  })

  it("a half-open circuit can be forced either way", () => {
    const tripped = stepMachine(circuitMachine, closed, { type: "TRIP", at: T0 })
    const half = stepMachine(circuitMachine, tripped.persisted, { type: "PROBE", at: T0 + 30_000 })
    expect(half.state).toBe("half-open")
    const open = stepMachine(circuitMachine, half.persisted, { type: "FORCE_OPEN", at: T0 + 30_001, ...by })
    expect(open.state).toBe("open")
    expect(open.snapshot.context).toMatchObject({ forced: true, trips: 2 })
    expect(stepMachine(circuitMachine, half.persisted, { type: "FORCE_CLOSE", at: T0 + 30_001, ...by }).state).toBe("closed")
  })

  it("snapshots stored before the lever existed (no `forced`) behave as not forced", () => {
    const tripped = stepMachine(circuitMachine, closed, { type: "TRIP", at: T0 })
    const { forced: _, ...old } = tripped.snapshot.context
    const stored: PersistedSnapshot = { value: "open", context: old }
    expect(stepMachine(circuitMachine, stored, { type: "RESET", at: T0 + 1 }).state).toBe("closed")
  })
})

describe("settlement machine: retry now", () => {
  it("a settlement waiting for its backoff is retried now; other states refuse", () => {
    const start = startMachine(settlementMachine, {}).persisted
    const retrying = stepMachine(settlementMachine, start, { type: "FAILED_TRANSIENT", at: T0, error: "rpc down" })
    expect(retrying.state).toBe("retrying")
    const now = stepMachine(settlementMachine, retrying.persisted, { type: "RETRY_NOW", at: T0 + 1, ...by })
    expect(now.state).toBe("reserved")
    expect(now.actions).toEqual([])
    expect(stepMachine(settlementMachine, start, { type: "RETRY_NOW", at: T0, ...by }).changed).toBe(false)
    const failed = stepMachine(settlementMachine, start, { type: "FAILED_FINAL", at: T0, reason: "insufficient_funds" })
    expect(stepMachine(settlementMachine, failed.persisted, { type: "RETRY_NOW", at: T0 + 1, ...by }).changed).toBe(false)
  })
})

describe("execution machine: a suspended agent's money", () => {
  const running = startMachine(executionMachine, { retryWindowMs: 600_000, deadlineMs: 90_000, startedAt: T0 }).persisted
  const settled = stepMachine(executionMachine, running, { type: "PAYMENT_SETTLED", at: T0 + 5 }).persisted

  it("an instant agent that is suspended keeps its money held: the release is refused until reinstatement re-arms it", () => {
    const done = stepMachine(executionMachine, withContext(settled, { frozen: true }), { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 0 })
    expect(done.state).toBe("completed.held")
    expect(actionsOf(done, "releaseEscrow")).toEqual([])
    expect(actionsOf(done, "scheduleTimer")).toEqual([{ event: "RELEASE_DUE", at: T0 + 10 }])
    const frozen = withContext(done.persisted, { frozen: true })
    expect(stepMachine(executionMachine, frozen, { type: "RELEASE_DUE", at: T0 + 10 }).changed).toBe(false)
    expect(stepMachine(executionMachine, frozen, { type: "AGENT_REINSTATED", at: T0 + 99, ...by }).changed).toBe(false)

    // Reinstated (the fact is false again): the release is armed at its original time, then goes through.
    const thawed = withContext(done.persisted, { frozen: false })
    const reinstated = stepMachine(executionMachine, thawed, { type: "AGENT_REINSTATED", at: T0 + 99, ...by })
    expect(reinstated.state).toBe("completed.held")
    expect(actionsOf(reinstated, "scheduleTimer")).toEqual([{ event: "RELEASE_DUE", at: T0 + 10 }])
    const released = stepMachine(executionMachine, reinstated.persisted, { type: "RELEASE_DUE", at: T0 + 100 })
    expect(released.state).toBe("completed.released")
    expect(released.actions.map((a) => a.type)).toEqual(["releaseEscrow"])
    expect(stepMachine(executionMachine, released.persisted, { type: "AGENT_REINSTATED", at: T0 + 101, ...by }).changed).toBe(false)
  })

  it("a delayed release falls due while suspended: refused; after reinstatement it is released", () => {
    const held = stepMachine(executionMachine, settled, { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 3_600_000 })
    expect(held.state).toBe("completed.held")
    expect(stepMachine(executionMachine, withContext(held.persisted, { frozen: true }), { type: "RELEASE_DUE", at: T0 + 3_600_010 }).changed).toBe(false)
    const due = stepMachine(executionMachine, withContext(held.persisted, { frozen: false }), { type: "RELEASE_DUE", at: T0 + 3_600_010 })
    expect(due.state).toBe("completed.released")
  })

  it("the freeze does not stop refunds to the payer: a failed call of a suspended agent is refunded when its window closes", () => {
    const failed = stepMachine(executionMachine, withContext(settled, { frozen: true }), { type: "AGENT_FAILED", at: T0 + 10, timedOut: false, error: "boom" })
    const closed = stepMachine(executionMachine, withContext(failed.persisted, { frozen: true }), { type: "RETRY_WINDOW_CLOSED", at: T0 + 600_010 })
    expect(closed.state).toBe("refunding")
    expect(closed.actions.map((a) => a.type)).toContain("startRefund")
  })
})

describe("execution machine: refund retried now", () => {
  it("a refunding execution asks the host to send its pending refund now; it stays refunding; other states refuse", () => {
    const running = startMachine(executionMachine, { retryWindowMs: 600_000, deadlineMs: 90_000, startedAt: T0 }).persisted
    const steps = [
      { type: "PAYMENT_SETTLED", at: T0 + 5 },
      { type: "AGENT_FAILED", at: T0 + 10, timedOut: false, error: "boom" },
      { type: "RETRY_WINDOW_CLOSED", at: T0 + 600_010 }
    ] as const
    const refunding = steps.reduce((persisted, event) => stepMachine(executionMachine, persisted, event).persisted, running)
    expect(refunding.value).toBe("refunding")
    const retried = stepMachine(executionMachine, refunding, { type: "REFUND_RETRY", at: T0 + 700_000, ...by })
    expect(retried.changed).toBe(true)
    expect(retried.state).toBe("refunding")
    expect(retried.actions.map((a) => a.type)).toEqual(["retryRefund"])
    expect(stepMachine(executionMachine, running, { type: "REFUND_RETRY", at: T0 + 1, ...by }).changed).toBe(false)
  })
})
