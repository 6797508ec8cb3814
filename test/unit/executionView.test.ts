import { describe, expect, it } from "@effect/vitest"
import { forCallback, forClient, type ViewRow } from "../../services/executions/View.js"

const row = (overrides: Partial<ViewRow> = {}): ViewRow => ({
  id: "req_1",
  transactionId: "tx_1",
  status: "completed",
  output: { answer: 42 },
  executionTimeMs: 120,
  agentFee: 10_000n,
  platformFee: 1_000n,
  price: 11_000n,
  settlementState: "settled",
  settlementTxHash: "0xabc",
  attempts: 1,
  retryUntil: null,
  error: null,
  refundStatus: null,
  refundTxHash: null,
  ...overrides
})

describe("execution views", () => {
  it("show output and cost only to the holder of the payment header, and only once the payment settled", () => {
    expect(forClient(row(), true)).toMatchObject({ transactionId: "tx_1", output: { answer: 42 }, cost: { agentFee: "0.010000", platformFee: "0.001000", total: "0.011000" } })
    const stranger = forClient(row(), false)
    expect(stranger.transactionId).toBeUndefined()
    expect(stranger.output).toBeUndefined()
    expect(stranger.cost).toBeUndefined()
    expect(stranger.message).toMatch(/X-PAYMENT/)
    const unsettled = forClient(row({ settlementState: "reserved", settlementTxHash: null }), true)
    expect(unsettled.output).toBeUndefined()
    expect(unsettled.settlement).toEqual({ status: "settlement_pending", txHash: null })
    expect(unsettled.message).toMatch(/settles/)
  })

  it("a failed execution shows its error and retry window; a refund shows its transaction", () => {
    const until = new Date("2026-11-23T10:00:00Z")
    const failed = forClient(row({ status: "failed", output: null, error: "boom", retryUntil: until }), true)
    expect(failed).toMatchObject({ status: "failed", error: "boom", retryUntil: until.toISOString() })
    const refunded = forClient(row({ status: "refunded", refundStatus: "confirmed", refundTxHash: "0xdef" }), true)
    expect(refunded.refund).toEqual({ status: "confirmed", txHash: "0xdef" })
    expect(forClient(row({ settlementState: "failed" }), true).settlement.status).toBe("settlement_failed")
  })

  it("the callback post withholds the output of an unsettled execution", () => {
    expect(forCallback({ ...row(), settlementState: "reserved" }).output).toBeNull()
    expect(forCallback(row()).output).toEqual({ answer: 42 })
    expect(forCallback({ ...row(), status: "failed", error: "x" })).toMatchObject({ status: "failed", error: "x", output: null })
  })
})
