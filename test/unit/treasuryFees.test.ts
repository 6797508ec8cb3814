// The replacement of an underpriced treasury transaction: when, how much, and never past the ceiling.
import { describe, expect, it } from "vitest"
import { replacementFees } from "../../services/treasury/fees.js"

const gwei = (n: number) => BigInt(n) * 1_000_000_000n
const ceiling = gwei(500)

describe("replacementFees", () => {
  it("leaves a transaction whose max fee still covers the base fee and the priority fee alone", () => {
    expect(replacementFees({ maxFeePerGas: gwei(10), maxPriorityFeePerGas: gwei(1) }, { baseFee: gwei(9), priorityFee: gwei(1) }, ceiling)).toEqual({ _tag: "NotNeeded" })
  })

  it("after a spike pays 2 × base fee + priority, and at least 12.5% more than before on both fees", () => {
    const old = { maxFeePerGas: gwei(10), maxPriorityFeePerGas: gwei(1) }
    const spiked = replacementFees(old, { baseFee: gwei(40), priorityFee: gwei(1) }, ceiling)
    expect(spiked).toEqual({ _tag: "Replace", fees: { maxFeePerGas: gwei(81), maxPriorityFeePerGas: old.maxPriorityFeePerGas + old.maxPriorityFeePerGas / 8n + 1n } })
    // A base fee just past the old max fee: the +12.5% bump is what a node needs to take the replacement.
    const nudged = replacementFees(old, { baseFee: gwei(5), priorityFee: gwei(6) }, ceiling)
    expect(nudged).toEqual({ _tag: "Replace", fees: { maxFeePerGas: gwei(16), maxPriorityFeePerGas: gwei(6) } })
    if (nudged._tag === "Replace") expect(nudged.fees.maxFeePerGas).toBeGreaterThanOrEqual(old.maxFeePerGas + old.maxFeePerGas / 8n + 1n)
  })

  it("never signs past the ceiling: capped when the bump fits under it, not replaced when it does not", () => {
    expect(replacementFees({ maxFeePerGas: gwei(300), maxPriorityFeePerGas: gwei(2) }, { baseFee: gwei(400), priorityFee: gwei(2) }, ceiling))
      .toEqual({ _tag: "Replace", fees: { maxFeePerGas: ceiling, maxPriorityFeePerGas: gwei(2) + gwei(2) / 8n + 1n } })
    expect(replacementFees({ maxFeePerGas: gwei(480), maxPriorityFeePerGas: gwei(2) }, { baseFee: gwei(600), priorityFee: gwei(2) }, ceiling))
      .toEqual({ _tag: "PastCeiling" })
  })
})
