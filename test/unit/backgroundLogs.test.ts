// The host's line for each problem transition (level, event name, ids, cause), and the ledger's money flows for /metrics.
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger, Option } from "effect"
import { jsonLine } from "../../layers/observability/Logging.js"
import { logTransition, transitionLevel } from "../../layers/observability/machineLog.js"
import type { MachineKind } from "../../machines/Host.js"
import { flowsOf } from "../../services/ledger/flows.js"
import { Accounts } from "../../services/ledger/Ledger.js"

const lineOf = (kind: MachineKind, id: string, event: Record<string, unknown>, from: string, to: string) =>
  Effect.gen(function* () {
    const lines: Array<Record<string, unknown>> = []
    const capture = Logger.make((options) => void lines.push(JSON.parse(jsonLine(options)) as Record<string, unknown>))
    yield* logTransition(kind, id, event, Option.some({ from, state: to, changed: true })).pipe(
      Effect.provide(Logger.replace(Logger.defaultLogger, capture))
    )
    return lines
  })

describe("background log lines", () => {
  it.effect("a settlement retried, failed for good, and tried again: each its line with the payment id and cause", () =>
    Effect.gen(function* () {
      expect(yield* lineOf("settlement", "pay_1", { type: "FAILED_TRANSIENT", at: 1, error: "rpc unreachable" }, "reserved", "retrying")).toEqual([
        expect.objectContaining({ level: "warn", event: "settlement.retrying", paymentId: "pay_1", cause: "rpc unreachable", trigger: "FAILED_TRANSIENT" })
      ])
      expect(yield* lineOf("settlement", "pay_1", { type: "FAILED_FINAL", at: 2, reason: "authorization expired" }, "retrying", "failed")).toEqual([
        expect.objectContaining({ level: "error", event: "settlement.failed", paymentId: "pay_1", cause: "authorization expired" })
      ])
      expect(yield* lineOf("settlement", "pay_1", { type: "RETRY_NOW", at: 3, by: "alice", reason: "rpc back" }, "retrying", "reserved")).toEqual([
        expect.objectContaining({ level: "info", event: "settlement.retry", operator: "alice", cause: "rpc back" })
      ])
    }))

  it.effect("a treasury transaction reverted or not broadcast, a payout failed, an execution past its deadline", () =>
    Effect.gen(function* () {
      expect(yield* lineOf("treasury", "ttx_1", { type: "MINED", at: 1, success: false, block: "12" }, "broadcast", "reverted")).toEqual([
        expect.objectContaining({ level: "warn", event: "treasury.reverted", treasuryTxId: "ttx_1", block: "12", success: false })
      ])
      expect(yield* lineOf("treasury", "ttx_1", { type: "BROADCAST_FAILED", at: 1, error: "connection refused" }, "signed", "signed")).toEqual([
        expect.objectContaining({ level: "warn", event: "treasury.broadcast_failed", cause: "connection refused" })
      ])
      expect(yield* lineOf("withdrawal", "wd_1", { type: "FAILED", at: 1, reason: "reverted" }, "processing", "failed")).toEqual([
        expect.objectContaining({ level: "error", event: "withdrawal.failed", withdrawalId: "wd_1", cause: "reverted" })
      ])
      expect(yield* lineOf("execution", "req_1", { type: "AGENT_DEADLINE", at: 1 }, "running", "timeout")).toEqual([
        expect.objectContaining({ level: "warn", event: "execution.timeout", executionId: "req_1", trigger: "AGENT_DEADLINE" })
      ])
    }))

  it("routine steps of a paid call write no line", () => {
    expect(transitionLevel("execution", "running", "completed.held", "AGENT_SUCCEEDED")).toBeUndefined()
    expect(transitionLevel("execution", "completed.held", "completed.released", "RELEASE_DUE")).toBeUndefined()
    expect(transitionLevel("settlement", "reserved", "settled", "SETTLED")).toBeUndefined()
    expect(transitionLevel("treasury", "signed", "confirmed", "MINED")).toBeUndefined()
    expect(transitionLevel("webhookDelivery", "pending", "delivered", "DELIVERED")).toBeUndefined()
  })
})

describe("money flows", () => {
  it("payments in, fees earned and given back, refunds and payouts out", () => {
    expect(flowsOf({ debit: Accounts.treasury, credit: Accounts.settlementReceivable, amount: 5n })).toEqual(["paid"])
    expect(flowsOf({ debit: Accounts.treasury, credit: Accounts.platformRevenue, amount: 5n })).toEqual(["paid", "platform_fee"])
    expect(flowsOf({ debit: Accounts.escrow, credit: Accounts.platformRevenue, amount: 5n })).toEqual(["platform_fee"])
    expect(flowsOf({ debit: Accounts.platformRevenue, credit: Accounts.disputesHeld, amount: 5n })).toEqual(["platform_fee_returned"])
    expect(flowsOf({ debit: Accounts.refundsPayable, credit: Accounts.treasury, amount: 5n })).toEqual(["refunded"])
    expect(flowsOf({ debit: Accounts.withdrawalsPayable, credit: Accounts.treasury, amount: 5n })).toEqual(["paid_out"])
    expect(flowsOf({ debit: Accounts.treasury, credit: "treasury_opening", amount: 5n })).toEqual([])
    expect(flowsOf({ debit: Accounts.settlementReceivable, credit: Accounts.escrow, amount: 5n })).toEqual([])
  })
})
