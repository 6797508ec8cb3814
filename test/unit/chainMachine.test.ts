// The chain machine and the chained path of the execution machine, stepped purely (as the host does: persist, restore).
import { describe, expect, it } from "@effect/vitest"
import { CHAIN_RECHECK_MS, CHAIN_TIMEOUT_MS, type ChainContext, chainMachine } from "../../machines/chain.js"
import { executionMachine, executionStatus } from "../../machines/execution.js"
import { actionsOf, type PersistedSnapshot, startMachine, stepMachine } from "../../machines/step.js"
import { chainOutcome } from "../../services/chains/chainSpec.js"

const T0 = 1_800_000_000_000

/** A stored chain snapshot with the facts the host reads under the lock. */
const withFacts = (persisted: PersistedSnapshot, facts: Partial<ChainContext>): PersistedSnapshot => ({
  value: persisted.value,
  context: { ...(persisted.context as ChainContext), ...facts }
})

const quiet = { rootAnswered: true, inFlight: 0, payment: "settled" } as const

describe("chain machine", () => {
  it("starts pending with its 5-minute timer armed, and runs once the root payment settled", () => {
    const start = startMachine(chainMachine, { deadline: T0 + CHAIN_TIMEOUT_MS })
    expect(start.state).toBe("pending")
    expect(actionsOf(start, "scheduleTimeout")).toEqual([{ at: T0 + CHAIN_TIMEOUT_MS }])
    expect(stepMachine(chainMachine, start.persisted, { type: "FUNDED", at: T0 + 1 }).state).toBe("running")
  })

  it("a check ends the chain only when the root answered, nothing is in flight and the payment's fate is known", () => {
    const running = stepMachine(chainMachine, startMachine(chainMachine, { deadline: T0 + CHAIN_TIMEOUT_MS }).persisted, { type: "FUNDED", at: T0 })
    for (const busy of [{ ...quiet, rootAnswered: false }, { ...quiet, inFlight: 1 }, { ...quiet, payment: "pending" as const }]) {
      expect(stepMachine(chainMachine, withFacts(running.persisted, busy), { type: "CHECK", at: T0 + 5 }).changed).toBe(false)
    }
    const ended = stepMachine(chainMachine, withFacts(running.persisted, quiet), { type: "CHECK", at: T0 + 5 })
    expect(ended.state).toBe("ended")
    expect(ended.actions.map((a) => a.type)).toEqual(["cancelTimeout", "finish"])
    // Final: nothing finishes it twice.
    expect(stepMachine(chainMachine, withFacts(ended.persisted, quiet), { type: "CHECK", at: T0 + 6 }).changed).toBe(false)
    expect(stepMachine(chainMachine, withFacts(ended.persisted, quiet), { type: "TIMEOUT", at: T0 + 7 }).changed).toBe(false)
  })

  it("its timer ends a quiet chain (a root whose process died, its payment failed) and re-arms while it is not", () => {
    const start = startMachine(chainMachine, { deadline: T0 + CHAIN_TIMEOUT_MS })
    const at = T0 + CHAIN_TIMEOUT_MS
    const busy = stepMachine(chainMachine, withFacts(start.persisted, { ...quiet, inFlight: 2 }), { type: "TIMEOUT", at })
    expect(busy.state).toBe("pending")
    expect(actionsOf(busy, "scheduleTimeout")).toEqual([{ at: at + CHAIN_RECHECK_MS }])
    const failed = stepMachine(chainMachine, withFacts(busy.persisted, { ...quiet, payment: "failed" }), { type: "TIMEOUT", at: at + CHAIN_RECHECK_MS })
    expect(failed.state).toBe("ended")
  })

  it("the outcome: failed unless the root completed; partial when a sub-call failed", () => {
    expect(chainOutcome("settled", [{ depth: 0, status: "completed" }, { depth: 1, status: "completed" }])).toBe("completed")
    expect(chainOutcome("settled", [{ depth: 0, status: "completed" }, { depth: 1, status: "failed" }])).toBe("partial")
    expect(chainOutcome("settled", [{ depth: 0, status: "timeout" }, { depth: 1, status: "completed" }])).toBe("failed")
    expect(chainOutcome("failed", [{ depth: 0, status: "failed" }])).toBe("failed")
  })
})

describe("execution machine inside a chain", () => {
  const chained = () => {
    const start = startMachine(executionMachine, { retryWindowMs: 600_000, deadlineMs: 90_000, startedAt: T0, chained: true })
    return stepMachine(executionMachine, start.persisted, { type: "PAYMENT_SETTLED", at: T0 })
  }

  it("a failed or dead sub-call gives its reservation back at once: no retry window, no refund; its outcome counts (for health)", () => {
    for (const event of [
      { type: "AGENT_FAILED" as const, at: T0 + 5, timedOut: false, error: "boom" },
      { type: "AGENT_FAILED" as const, at: T0 + 5, timedOut: true, error: "slow" },
      { type: "AGENT_DEADLINE" as const, at: T0 + 90_000 }
    ]) {
      const step = stepMachine(executionMachine, chained().persisted, event)
      expect(step.state).toBe("returned")
      expect(step.actions.map((a) => a.type)).toEqual(["cancelTimer", "recordOutcome", "scoreOutcomes", "returnToChain"])
      expect(executionStatus(step.state, step.snapshot.context)).toBe(event.type === "AGENT_FAILED" && !event.timedOut ? "failed" : "timeout")
      expect(stepMachine(executionMachine, step.persisted, { type: "RETRY", at: T0 + 10 }).changed).toBe(false)
    }
  })

  it("a successful sub-call is released like any paid execution", () => {
    const done = stepMachine(executionMachine, chained().persisted, { type: "AGENT_SUCCEEDED", at: T0 + 5, releaseDelayMs: 0 })
    expect(done.state).toBe("completed.released")
    expect(done.actions.map((a) => a.type)).toContain("releaseEscrow")
  })
})
