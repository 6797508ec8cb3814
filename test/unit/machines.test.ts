import { describe, expect, it } from "@effect/vitest"
import { createActor, SimulatedClock } from "xstate"
import { circuitMachine } from "../../machines/circuit.js"
import { type ExecutionEvent, executionMachine, executionStatus } from "../../machines/execution.js"
import { settlementBackoffMs, settlementMachine } from "../../machines/settlement.js"
import { actionsOf, type PersistedSnapshot, startMachine, stepMachine } from "../../machines/step.js"

/** Runs events through a machine the way the service does: persist as JSON after every step, restore before the next. */
const run = <M extends typeof executionMachine | typeof circuitMachine | typeof settlementMachine>(
  machine: M,
  start: PersistedSnapshot,
  events: ReadonlyArray<Parameters<typeof stepMachine<M>>[2]>
) => {
  let persisted: PersistedSnapshot = JSON.parse(JSON.stringify(start))
  const steps = events.map((event) => {
    const step = stepMachine(machine, persisted, event)
    persisted = JSON.parse(JSON.stringify(step.persisted))
    return step
  })
  return { steps, last: steps[steps.length - 1]! }
}

const T0 = 1_700_000_000_000
const newExecution = () => startMachine(executionMachine, { retryWindowMs: 600_000, deadlineMs: 90_000, startedAt: T0 })

describe("execution machine", () => {
  it("a call paid from credit that fails or dies goes back to the credit at once (returned, no retry window)", () => {
    const start = startMachine(executionMachine, { retryWindowMs: 600_000, deadlineMs: 90_000, startedAt: T0, credit: true })
    for (const event of [
      { type: "AGENT_FAILED", at: T0 + 5, timedOut: false, error: "boom" },
      { type: "AGENT_DEADLINE", at: T0 + 90_000 }
    ] as const) {
      const { last } = run(executionMachine, start.persisted, [{ type: "PAYMENT_SETTLED", at: T0 }, event])
      expect(last.state).toBe("returned")
      expect(last.actions.map((a) => a.type)).toContain("returnToCredit")
      expect(actionsOf(last, "scheduleTimer")).toEqual([])
      expect(executionStatus(last.state, last.snapshot.context)).toBe(event.type === "AGENT_FAILED" ? "failed" : "timeout")
    }
  })

  it("a dispute resolved into a channel (or against its write-off) is settled in its step; a wallet refund waits for the chain", () => {
    const start = startMachine(executionMachine, { retryWindowMs: 600_000, deadlineMs: 90_000, startedAt: T0, credit: true })
    const disputed = [
      { type: "PAYMENT_SETTLED", at: T0 },
      { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 86_400_000 },
      { type: "DISPUTE_OPENED", at: T0 + 20, disputeId: "dsp_1" }
    ] as const
    for (const refundTo of ["channel", "writtenOff"] as const) {
      const { last } = run(executionMachine, start.persisted, [...disputed, { type: "DISPUTE_RESOLVED", at: T0 + 30, disputeId: "dsp_1", clientShare: "2750", refundTo }])
      expect(last.state).toBe("completed.resolved")
      expect(actionsOf(last, "settleDispute")).toEqual([{ clientShare: "2750", refundTo }])
    }
    const wallet = run(executionMachine, start.persisted, [...disputed, { type: "DISPUTE_RESOLVED", at: T0 + 30, disputeId: "dsp_1", clientShare: "2750" }])
    expect(wallet.last.state).toBe("completed.refundingDispute")
    expect(actionsOf(wallet.last, "settleDispute")).toEqual([{ clientShare: "2750" }])
  })

  it("arms a dead-attempt deadline when an attempt starts", () => {
    const start = newExecution()
    expect(start.state).toBe("running")
    expect(actionsOf(start, "scheduleTimer")).toEqual([{ event: "AGENT_DEADLINE", at: T0 + 90_000 }])
  })

  it("releases at once for an instant agent once both the result and the settlement are in, in either order", () => {
    const first = run(executionMachine, newExecution().persisted, [
      { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 0 },
      { type: "PAYMENT_SETTLED", at: T0 + 20 }
    ])
    expect(first.steps[0]!.state).toBe("completed.awaitingPayment")
    expect(first.last.state).toBe("completed.released")
    // The settlement also makes the result count for reputation (scored only once paid).
    expect(first.last.actions.map((a) => a.type)).toEqual(["releaseEscrow", "scoreOutcomes"])

    const second = run(executionMachine, newExecution().persisted, [
      { type: "PAYMENT_SETTLED", at: T0 + 5 },
      { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 0 }
    ])
    expect(second.last.state).toBe("completed.released")
    // Leaving `running` drops the dead-attempt deadline; the result is announced; the money is released; the paid result is scored.
    expect(second.last.actions.map((a) => a.type)).toEqual(["cancelTimer", "recordOutcome", "releaseEscrow", "scoreOutcomes"])
    expect(actionsOf(second.last, "cancelTimer")).toEqual([{ event: "AGENT_DEADLINE" }])
  })

  it("holds a delayed agent's money until its release time (a durable timer), then releases it", () => {
    const { last, steps } = run(executionMachine, newExecution().persisted, [
      { type: "PAYMENT_SETTLED", at: T0 + 5 },
      { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 86_400_000 },
      { type: "RELEASE_DUE", at: T0 + 10 + 86_400_000 }
    ])
    expect(steps[1]!.state).toBe("completed.held")
    expect(actionsOf(steps[1]!, "scheduleTimer")).toEqual([{ event: "RELEASE_DUE", at: T0 + 10 + 86_400_000 }])
    expect(last.state).toBe("completed.released")
    expect(executionStatus(last.state, last.snapshot.context)).toBe("completed")
  })

  it("a failure opens the retry window once; a retry inside it runs again, a retry after it is refused", () => {
    const failed = run(executionMachine, newExecution().persisted, [
      { type: "PAYMENT_SETTLED", at: T0 + 1 },
      { type: "AGENT_FAILED", at: T0 + 100, timedOut: false, error: "boom" }
    ])
    expect(failed.last.state).toBe("failed")
    expect(failed.last.snapshot.context.retryUntil).toBe(T0 + 100 + 600_000)
    expect(actionsOf(failed.last, "scheduleTimer")).toEqual([{ event: "RETRY_WINDOW_CLOSED", at: T0 + 600_100 }])
    expect(actionsOf(failed.last, "recordOutcome")).toEqual([{ success: false }])

    const retried = run(executionMachine, failed.last.persisted, [
      { type: "RETRY", at: T0 + 1_000 },
      { type: "AGENT_FAILED", at: T0 + 2_000, timedOut: true, error: "slow" }
    ])
    expect(retried.steps[0]!.state).toBe("running")
    expect(retried.last.state).toBe("timeout")
    // The window is not extended by the second failure.
    expect(retried.last.snapshot.context.retryUntil).toBe(T0 + 600_100)

    const late = stepMachine(executionMachine, retried.last.persisted, { type: "RETRY", at: T0 + 600_100 })
    expect(late.changed).toBe(false)
  })

  it("refunds when the window closes on a settled payment, and only confirms after the chain does", () => {
    const { last, steps } = run(executionMachine, newExecution().persisted, [
      { type: "PAYMENT_SETTLED", at: T0 + 1 },
      { type: "AGENT_FAILED", at: T0 + 100, timedOut: false, error: "boom" },
      { type: "RETRY_WINDOW_CLOSED", at: T0 + 600_100 },
      { type: "REFUND_CONFIRMED", at: T0 + 600_200, txHash: "0xabc" }
    ])
    expect(steps[2]!.state).toBe("refunding")
    expect(steps[2]!.actions.map((a) => a.type)).toContain("startRefund")
    expect(executionStatus(steps[2]!.state, steps[2]!.snapshot.context)).toBe("failed")
    expect(last.state).toBe("refunded")
    expect(actionsOf(last, "confirmRefund")).toEqual([{ txHash: "0xabc" }])
  })

  it("waits for a late settlement before refunding, and voids when the payment never settles", () => {
    const waiting = run(executionMachine, newExecution().persisted, [
      { type: "AGENT_FAILED", at: T0 + 100, timedOut: false, error: "boom" },
      { type: "RETRY_WINDOW_CLOSED", at: T0 + 600_100 }
    ])
    expect(waiting.last.state).toBe("failed")
    expect(waiting.last.snapshot.context.windowClosed).toBe(true)
    expect(stepMachine(executionMachine, waiting.last.persisted, { type: "PAYMENT_SETTLED", at: T0 + 700_000 }).state).toBe("refunding")
    const voided = stepMachine(executionMachine, waiting.last.persisted, { type: "PAYMENT_FAILED", at: T0 + 700_000, reason: "insufficient_funds" })
    expect(voided.state).toBe("cancelled")
    expect(voided.actions.map((a) => a.type)).toEqual(["voidEscrow"])
  })

  it("withholds the output of a completed execution whose payment failed (escrow voided, agent not paid)", () => {
    const { last } = run(executionMachine, newExecution().persisted, [
      { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 0 },
      { type: "PAYMENT_FAILED", at: T0 + 20, reason: "insufficient_funds" }
    ])
    expect(last.state).toBe("completed.unpaid")
    expect(last.actions.map((a) => a.type)).toEqual(["voidEscrow"])
  })

  it("declares an attempt dead at its deadline (the process running it died) and ignores a result arriving after", () => {
    const { last } = run(executionMachine, newExecution().persisted, [{ type: "AGENT_DEADLINE", at: T0 + 90_000 }])
    expect(last.state).toBe("timeout")
    const late: ExecutionEvent = { type: "AGENT_SUCCEEDED", at: T0 + 95_000, releaseDelayMs: 0 }
    expect(stepMachine(executionMachine, last.persisted, late).changed).toBe(false)
  })
})

describe("execution machine: scores only paid outcomes", () => {
  it("scores a success only once its payment settled, and every attempt's outcome in order", () => {
    const unpaid = run(executionMachine, newExecution().persisted, [{ type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 0 }])
    expect(actionsOf(unpaid.last, "scoreOutcomes")).toEqual([])
    const retried = run(executionMachine, newExecution().persisted, [
      { type: "AGENT_FAILED", at: T0 + 10, timedOut: false, error: "boom" },
      { type: "RETRY", at: T0 + 20 },
      { type: "AGENT_SUCCEEDED", at: T0 + 30, releaseDelayMs: 0 },
      { type: "PAYMENT_SETTLED", at: T0 + 40 }
    ])
    expect(retried.steps.slice(0, 3).flatMap((s) => actionsOf(s, "scoreOutcomes"))).toEqual([])
    expect(actionsOf(retried.last, "scoreOutcomes")).toEqual([{ outcomes: [false, true] }])
    // Once paid, a later outcome counts at once, and nothing is scored twice.
    const later = stepMachine(executionMachine, run(executionMachine, newExecution().persisted, [
      { type: "PAYMENT_SETTLED", at: T0 + 5 },
      { type: "AGENT_FAILED", at: T0 + 10, timedOut: true, error: "slow" }
    ]).last.persisted, { type: "RETRY", at: T0 + 20 })
    expect(actionsOf(later, "scoreOutcomes")).toEqual([])
  })

  it("never scores an outcome whose payment failed (a front-run or drained authorization cannot farm or sink a score)", () => {
    const { steps } = run(executionMachine, newExecution().persisted, [
      { type: "AGENT_SUCCEEDED", at: T0 + 10, releaseDelayMs: 0 },
      { type: "PAYMENT_FAILED", at: T0 + 20, reason: "insufficient_funds" }
    ])
    expect(steps.flatMap((s) => actionsOf(s, "scoreOutcomes"))).toEqual([])
    expect(steps.at(-1)!.state).toBe("completed.unpaid")
  })
})

describe("circuit machine", () => {
  const start = () => startMachine(circuitMachine, { resetTimeoutMs: 30_000 })

  it("opens with its retry time as data and arms the probe timer", () => {
    const opened = stepMachine(circuitMachine, start().persisted, { type: "TRIP", at: T0 })
    expect(opened.state).toBe("open")
    expect(opened.snapshot.context).toMatchObject({ openedAt: T0, retryAt: T0 + 30_000, trips: 1 })
    expect(actionsOf(opened, "scheduleProbe")).toEqual([{ at: T0 + 30_000 }])
  })

  it("stays open before its retry time, goes half-open after it, closes on success and re-opens on failure", () => {
    const opened = stepMachine(circuitMachine, start().persisted, { type: "TRIP", at: T0 })
    expect(stepMachine(circuitMachine, opened.persisted, { type: "PROBE", at: T0 + 29_999 }).changed).toBe(false)
    const half = run(circuitMachine, opened.persisted, [{ type: "PROBE", at: T0 + 30_000 }]).last
    expect(half.state).toBe("half-open")
    expect(stepMachine(circuitMachine, half.persisted, { type: "RESET", at: T0 + 31_000 }).state).toBe("closed")
    const again = stepMachine(circuitMachine, half.persisted, { type: "TRIP", at: T0 + 31_000 })
    expect(again.state).toBe("open")
    expect(again.snapshot.context).toMatchObject({ retryAt: T0 + 61_000, trips: 2 })
  })

  it("a restored open breaker is not stuck: its deadline survives in the snapshot (XState `after` timers would not)", () => {
    const opened = stepMachine(circuitMachine, start().persisted, { type: "TRIP", at: T0 })
    const restored: PersistedSnapshot = JSON.parse(JSON.stringify(opened.persisted))
    expect(stepMachine(circuitMachine, restored, { type: "PROBE", at: T0 + 30_000 }).state).toBe("half-open")
  })

  it("runs as a live actor under a simulated clock the same way", () => {
    const clock = new SimulatedClock()
    const actor = createActor(circuitMachine, { input: { resetTimeoutMs: 30_000 }, clock }).start()
    actor.send({ type: "TRIP", at: clock.now() })
    clock.increment(30_000)
    actor.send({ type: "PROBE", at: clock.now() })
    expect(actor.getSnapshot().value).toBe("half-open")
    actor.stop()
  })
})

describe("settlement machine", () => {
  it("backs off exponentially on transient faults and settles or fails for good, ignoring late duplicates", () => {
    const start = startMachine(settlementMachine, {})
    const { steps, last } = run(settlementMachine, start.persisted, [
      { type: "FAILED_TRANSIENT", at: T0, error: "rpc down" },
      { type: "RETRY_DUE", at: T0 + 2_000 },
      { type: "FAILED_TRANSIENT", at: T0 + 2_000, error: "rpc down" },
      { type: "RETRY_DUE", at: T0 + 6_000 },
      { type: "SETTLED", at: T0 + 6_100, txHash: "0x1" }
    ])
    expect(actionsOf(steps[0]!, "scheduleRetry")).toEqual([{ at: T0 + settlementBackoffMs(1) }])
    expect(actionsOf(steps[2]!, "scheduleRetry")).toEqual([{ at: T0 + 2_000 + settlementBackoffMs(2) }])
    expect(last.state).toBe("settled")
    expect(actionsOf(last, "onSettled")).toEqual([{ txHash: "0x1" }])
    const duplicate = stepMachine(settlementMachine, last.persisted, { type: "SETTLED", at: T0 + 7_000, txHash: "0x1" })
    expect(duplicate.changed).toBe(false)
    const failed = stepMachine(settlementMachine, start.persisted, { type: "FAILED_FINAL", at: T0, reason: "insufficient_funds" })
    expect(failed.state).toBe("failed")
    expect(actionsOf(failed, "onFailed")).toEqual([{ reason: "insufficient_funds" }])
    expect(settlementBackoffMs(20)).toBe(300_000)
  })
})
