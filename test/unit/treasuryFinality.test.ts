import { describe, expect, it } from "@effect/vitest"
import { finalBlock, isFinal, resolveConfirmations } from "../../layers/confirmations.js"
import { Option } from "effect"
import { type TreasuryTxEvent, treasuryTxMachine } from "../../machines/treasuryTx.js"
import { startMachine, stepMachine } from "../../machines/step.js"

const run = (events: ReadonlyArray<TreasuryTxEvent>) =>
  events.reduce((step, event) => stepMachine(treasuryTxMachine, step.persisted, event), startMachine(treasuryTxMachine, {}))

const mined = (final: boolean, success = true, block = "10"): TreasuryTxEvent => ({ type: "MINED", at: 1, success, block, final })

describe("treasury transaction finality", () => {
  it("with one confirmation an included transaction is final at once (a devnet; events from before finality too)", () => {
    expect(run([{ type: "BROADCAST", at: 0 }, mined(true)]).state).toBe("confirmed")
    expect(run([mined(true, false)]).state).toBe("reverted")
    expect(run([{ type: "MINED", at: 1, success: true, block: "3" }]).state).toBe("confirmed")
  })

  it("deeper, it is mined (booked) until FINALIZED, keeping the receipt's status for the final state", () => {
    const waiting = run([{ type: "BROADCAST", at: 0 }, mined(false)])
    expect(waiting.state).toBe("mined")
    expect(stepMachine(treasuryTxMachine, waiting.persisted, { type: "FINALIZED", at: 2, block: "10" }).state).toBe("confirmed")
    const reverted = run([mined(false, false), { type: "FINALIZED", at: 2, block: "10" }])
    expect(reverted.state).toBe("reverted")
  })

  it("a reorg before finality sends it again; included again it waits for the new block's depth", () => {
    const reorged = run([mined(false), { type: "REORGED", at: 2, block: "10" }])
    expect(reorged.state).toBe("reorged")
    expect(reorged.snapshot.context.reorgs).toBe(1)
    expect(reorged.snapshot.context.lastError).toContain("block 10")
    // Broadcasting again keeps it reorged (not "broadcast": its purpose booked it already and must not book it twice).
    expect(stepMachine(treasuryTxMachine, reorged.persisted, { type: "BROADCAST", at: 3 }).state).toBe("reorged")
    const again = stepMachine(treasuryTxMachine, reorged.persisted, mined(false, true, "12"))
    expect(again.state).toBe("mined")
    expect(stepMachine(treasuryTxMachine, again.persisted, { type: "FINALIZED", at: 4, block: "12" }).state).toBe("confirmed")
  })

  it("final states take no reorg: a transaction past its confirmations is not followed any more", () => {
    const done = run([mined(true)])
    expect(stepMachine(treasuryTxMachine, done.persisted, { type: "REORGED", at: 2, block: "10" }).changed).toBe(false)
  })

  it("confirmations: a default per chain, CHAIN_CONFIRMATIONS over it, and the last final block", () => {
    expect(resolveConfirmations("devnet", 84532, Option.none())).toBe(1)
    expect(resolveConfirmations("rpc", 1, Option.none())).toBe(12)
    expect(resolveConfirmations("rpc", 8453, Option.none())).toBe(10)
    expect(resolveConfirmations("rpc", 999, Option.none())).toBe(12)
    expect(resolveConfirmations("rpc", 1, Option.some(3))).toBe(3)
    expect(finalBlock(100n, 1)).toBe(100n)
    expect(finalBlock(100n, 4)).toBe(97n)
    expect(finalBlock(2n, 12)).toBe(0n)
    expect(isFinal(97n, 100n, 4)).toBe(true)
    expect(isFinal(98n, 100n, 4)).toBe(false)
  })
})
