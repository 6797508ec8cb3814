// The batch-settlement channel machine, stepped purely as the host does (persist as JSON, restore, one event).
import { describe, expect, it } from "@effect/vitest"
import { type ChannelEvent, channelMachine } from "../../machines/channel.js"
import { actionsOf, type PersistedSnapshot, startMachine, stepMachine } from "../../machines/step.js"

const T0 = 1_800_000_000_000

const run = (start: PersistedSnapshot, events: ReadonlyArray<ChannelEvent>) => {
  let persisted: PersistedSnapshot = JSON.parse(JSON.stringify(start))
  return events.map((event) => {
    const step = stepMachine(channelMachine, persisted, event)
    persisted = JSON.parse(JSON.stringify(step.persisted))
    return step
  })
}
const last = <A>(steps: ReadonlyArray<A>): A => steps[steps.length - 1]!

const fresh = () => startMachine(channelMachine, {}).persisted
const deposit = (balance: string, at = T0): ChannelEvent => ({ type: "DEPOSIT_INCLUDED", at, txHash: "0xd1", balance })
const opened = () => last(run(fresh(), [deposit("5000000")])).persisted

describe("channel machine", () => {
  it("waits for its deposit, opens on it with the on-chain balance, and ends in depositFailed when it never lands", () => {
    expect(startMachine(channelMachine, {}).state).toBe("depositPending")
    const open = last(run(fresh(), [deposit("5000000")]))
    expect(open.state).toBe("open")
    expect(actionsOf(open, "mirrorBalance")).toEqual([{ balance: "5000000" }])
    expect(actionsOf(open, "announce")).toEqual([{ outcome: "opened" }])

    const failed = last(run(fresh(), [{ type: "DEPOSIT_FAILED", at: T0, reason: "reverted" }]))
    expect(failed.state).toBe("depositFailed")
    expect(failed.snapshot.context.lastError).toBe("reverted")
    // Final: a late deposit log changes nothing (the host refuses it as a fact for a dead channel).
    expect(stepMachine(channelMachine, failed.persisted, deposit("1")).changed).toBe(false)
  })

  it("a top-up while open raises the mirrored balance and stays open; claims and settles book without leaving open", () => {
    const steps = run(opened(), [
      deposit("9000000", T0 + 1),
      { type: "CLAIMED", at: T0 + 2, txHash: "0xc1", totalClaimed: "300000" },
      { type: "SETTLED", at: T0 + 3, txHash: "0xs1", amount: "300000", unsettled: "0" }
    ])
    expect(steps.map((s) => s.state)).toEqual(["open", "open", "open"])
    expect(actionsOf(steps[0]!, "mirrorBalance")).toEqual([{ balance: "9000000" }])
    expect(actionsOf(steps[1]!, "bookClaim")).toEqual([{ totalClaimed: "300000" }])
    expect(actionsOf(steps[2]!, "bookSettle")).toEqual([{ amount: "300000" }])
    expect(last(steps).snapshot.context.claims).toBe(1)
  })

  it("the payer's WithdrawInitiated stops charging (withdrawing) and arms a claim before the payer can finalize", () => {
    const withdrawing = last(run(opened(), [{ type: "WITHDRAW_INITIATED", at: T0 + 10, finalizableAt: T0 + 86_400_000 }]))
    expect(withdrawing.state).toBe("withdrawing")
    expect(actionsOf(withdrawing, "claimBefore")).toEqual([{ at: T0 + 86_400_000 }])
    expect(withdrawing.snapshot.context).toMatchObject({ withdrawRequestedAt: T0 + 10, finalizableAt: T0 + 86_400_000 })
    // No top-up reopens a withdrawing channel for charges (its balance is only mirrored).
    expect(stepMachine(channelMachine, withdrawing.persisted, deposit("9000000")).state).toBe("withdrawing")
  })

  it("a finalized withdrawal writes off what was never claimed, then drains until the last settle closes it", () => {
    const steps = run(opened(), [
      { type: "WITHDRAW_INITIATED", at: T0 + 10, finalizableAt: T0 + 100 },
      { type: "CLAIMED", at: T0 + 20, txHash: "0xc1", totalClaimed: "400000" },
      { type: "WITHDRAW_FINALIZED", at: T0 + 100, txHash: "0xw1", amount: "4600000", unsettled: "400000" },
      { type: "SETTLED", at: T0 + 200, txHash: "0xs1", amount: "400000", unsettled: "0" }
    ])
    expect(steps.map((s) => s.state)).toEqual(["withdrawing", "withdrawing", "drained", "closed"])
    expect(actionsOf(steps[2]!, "writeOffUnclaimed")).toEqual([{ reason: "withdrawn" }])
    expect(actionsOf(steps[3]!, "bookSettle")).toEqual([{ amount: "400000" }])
    expect(actionsOf(steps[3]!, "announce")).toEqual([{ outcome: "closed" }])
  })

  it("a refund with nothing left to settle closes the channel at once", () => {
    const refunded = last(run(opened(), [{ type: "REFUNDED", at: T0 + 5, txHash: "0xr1", amount: "5000000", unsettled: "0" }]))
    expect(refunded.state).toBe("closed")
    expect(actionsOf(refunded, "writeOffUnclaimed")).toEqual([{ reason: "refunded" }])
  })

  it("a partial refund keeps the channel open with its balance mirror lowered; refunding the rest drains it", () => {
    const steps = run(opened(), [
      { type: "REFUNDED", at: T0 + 5, txHash: "0xr1", amount: "2000000", unsettled: "0", balance: "3000000", left: "3000000" },
      { type: "REFUNDED", at: T0 + 6, txHash: "0xr2", amount: "2600000", unsettled: "400000", balance: "400000", left: "0" }
    ])
    expect(steps.map((s) => s.state)).toEqual(["open", "drained"])
    expect(actionsOf(steps[0]!, "setBalance")).toEqual([{ balance: "3000000" }])
    expect(actionsOf(steps[0]!, "writeOffUnclaimed")).toEqual([])
    expect(actionsOf(steps[1]!, "writeOffUnclaimed")).toEqual([{ reason: "refunded" }])
    expect(actionsOf(steps[1]!, "setBalance")).toEqual([{ balance: "400000" }])
    // A refund recorded before partial refunds existed (no `left`) still means the payer left.
    expect(last(run(opened(), [{ type: "REFUNDED", at: T0 + 5, txHash: "0xr1", amount: "1", unsettled: "0" }])).state).toBe("closed")
    // A partial refund while the payer withdraws: the withdrawal goes on.
    const withdrawing = run(opened(), [
      { type: "WITHDRAW_INITIATED", at: T0 + 10, finalizableAt: T0 + 100 },
      { type: "REFUNDED", at: T0 + 11, txHash: "0xr3", amount: "1000000", unsettled: "0", balance: "4000000", left: "4000000" }
    ])
    expect(withdrawing.map((s) => s.state)).toEqual(["withdrawing", "withdrawing"])
  })

  it("a deposit into a channel the payer left opens it again with the chain's balance", () => {
    const fromDrained = run(opened(), [
      { type: "REFUNDED", at: T0 + 5, txHash: "0xr1", amount: "4600000", unsettled: "400000", balance: "400000", left: "0" },
      { type: "DEPOSIT_INCLUDED", at: T0 + 6, txHash: "0xd2", balance: "1400000" },
      { type: "SETTLED", at: T0 + 7, txHash: "0xs1", amount: "400000", unsettled: "0" }
    ])
    expect(fromDrained.map((s) => s.state)).toEqual(["drained", "open", "open"])
    expect(actionsOf(fromDrained[1]!, "setBalance")).toEqual([{ balance: "1400000" }])
    expect(actionsOf(fromDrained[1]!, "announce")).toEqual([{ outcome: "opened" }])
    // The settle of what was claimed before is still booked once the channel is open again.
    expect(actionsOf(fromDrained[2]!, "bookSettle")).toEqual([{ amount: "400000" }])
    const fromClosed = run(opened(), [
      { type: "REFUNDED", at: T0 + 5, txHash: "0xr1", amount: "5000000", unsettled: "0", balance: "0", left: "0" },
      { type: "DEPOSIT_INCLUDED", at: T0 + 6, txHash: "0xd2", balance: "1000000" }
    ])
    expect(fromClosed.map((s) => s.state)).toEqual(["closed", "open"])
  })

  it("a deposit included after the payer started withdrawing, or while a claim fails, is mirrored", () => {
    const steps = run(opened(), [
      { type: "WITHDRAW_INITIATED", at: T0 + 10, finalizableAt: T0 + 100 },
      { type: "DEPOSIT_INCLUDED", at: T0 + 11, txHash: "0xd2", balance: "7000000" },
      { type: "CLAIM_FAILED", at: T0 + 12, reason: "reverted" },
      { type: "DEPOSIT_INCLUDED", at: T0 + 13, txHash: "0xd3", balance: "8000000" }
    ])
    expect(steps.map((s) => s.state)).toEqual(["withdrawing", "withdrawing", "claimFailed", "claimFailed"])
    expect(actionsOf(steps[1]!, "mirrorBalance")).toEqual([{ balance: "7000000" }])
    expect(actionsOf(steps[3]!, "mirrorBalance")).toEqual([{ balance: "8000000" }])
  })

  it("a failed claim is a problem state that raises attention; a later claim returns to where the channel was", () => {
    const fromOpen = run(opened(), [
      { type: "CLAIM_FAILED", at: T0 + 1, reason: "reverted" },
      { type: "CLAIM_FAILED", at: T0 + 2, reason: "reverted again" },
      { type: "CLAIMED", at: T0 + 3, txHash: "0xc1", totalClaimed: "100" }
    ])
    expect(fromOpen.map((s) => s.state)).toEqual(["claimFailed", "claimFailed", "open"])
    expect(actionsOf(fromOpen[0]!, "raiseAttention")).toEqual([{ reason: "reverted" }])
    expect(fromOpen[1]!.snapshot.context.lastError).toBe("reverted again")
    expect(last(fromOpen).snapshot.context.lastError).toBeNull()

    // The payer starts withdrawing while the claim is failing: the claim deadline is armed, and the claim that
    // lands returns the channel to withdrawing, not open.
    const fromWithdraw = run(opened(), [
      { type: "CLAIM_FAILED", at: T0 + 1, reason: "reverted" },
      { type: "WITHDRAW_INITIATED", at: T0 + 2, finalizableAt: T0 + 50 },
      { type: "CLAIMED", at: T0 + 3, txHash: "0xc1", totalClaimed: "100" }
    ])
    expect(fromWithdraw.map((s) => s.state)).toEqual(["claimFailed", "claimFailed", "withdrawing"])
    expect(actionsOf(fromWithdraw[1]!, "claimBefore")).toEqual([{ at: T0 + 50 }])

    // The payer finalizes before any claim lands: the unclaimed charges are written off.
    const lost = run(opened(), [
      { type: "CLAIM_FAILED", at: T0 + 1, reason: "reverted" },
      { type: "WITHDRAW_FINALIZED", at: T0 + 9, txHash: "0xw1", amount: "5000000", unsettled: "0" }
    ])
    expect(last(lost).state).toBe("closed")
    expect(actionsOf(last(lost), "writeOffUnclaimed")).toEqual([{ reason: "withdrawn" }])
  })

  it("a withdrawal cannot be finalized on an open channel (the WithdrawInitiated log comes first)", () => {
    const step = stepMachine(channelMachine, opened(), { type: "WITHDRAW_FINALIZED", at: T0, txHash: "0x", amount: "1", unsettled: "0" })
    expect(step.changed).toBe(false)
  })
})
