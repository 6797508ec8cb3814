import { describe, expect, it } from "@effect/vitest"
import { disputeMachine } from "../../machines/dispute.js"
import { actionsOf, startMachine, stepMachine } from "../../machines/step.js"
import { clientShareAccount, freezeReleased, releaseWithDebt, resolve } from "../../services/disputes/money.js"
import { Accounts, type Movement } from "../../services/ledger/Ledger.js"

const money = { agentId: "a", price: 11_000n, platformPart: 2_500n, agentPart: 8_500n }
const net = (movements: ReadonlyArray<Movement>, account: string) =>
  movements.reduce((sum, m) => sum + (m.debit === account ? m.amount : 0n) - (m.credit === account ? m.amount : 0n), 0n)

describe("dispute money", () => {
  it("freezing released earnings takes what is available and records the rest as the agent's debt", () => {
    const frozen = freezeReleased(money, 3_000n)
    expect(frozen.debt).toBe(5_500n)
    expect(net(frozen.movements, Accounts.agentAvailable("a"))).toBe(3_000n)
    expect(net(frozen.movements, Accounts.agentDebt("a"))).toBe(5_500n)
    expect(net(frozen.movements, Accounts.disputesHeld)).toBe(-11_000n)
    expect(freezeReleased(money, -5n).debt).toBe(8_500n)
    expect(freezeReleased(money, 1_000_000n).debt).toBe(0n)
  })

  it("a resolution moves exactly the frozen price: client share, platform and agent in proportion, the debt repaid first", () => {
    for (const share of [0n, 1n, 2_750n, 5_500n, 10_999n, 11_000n]) {
      for (const debt of [0n, 100n, 8_500n]) {
        const r = resolve(money, share, debt)
        expect(r.toClient + r.toPlatform + r.toAgent + r.debtRepaid).toBe(money.price)
        expect(net(r.movements, Accounts.disputesHeld)).toBe(money.price)
        expect(r.debtRepaid).toBeLessThanOrEqual(debt)
        for (const m of r.movements) expect(m.amount >= 0n).toBe(true)
      }
    }
    expect(resolve(money, 2_750n, 0n)).toMatchObject({ toClient: 2_750n, toPlatform: 1_875n, toAgent: 6_375n })
    expect(resolve(money, 0n, 0n)).toMatchObject({ toPlatform: 2_500n, toAgent: 8_500n })
    expect(resolve(money, 11_000n, 8_500n)).toMatchObject({ toAgent: 0n, debtRepaid: 0n })
    expect(() => resolve(money, 11_001n, 0n)).toThrow(RangeError)
  })

  it("a channel-paid call's client share goes back to the channel's receivable, or against its write-off, never to refunds payable", () => {
    const intoChannel = resolve(money, 2_750n, 0n, clientShareAccount("channel"))
    expect(net(intoChannel.movements, Accounts.channelReceivable)).toBe(-2_750n)
    expect(net(intoChannel.movements, Accounts.refundsPayable)).toBe(0n)
    const writtenOff = resolve(money, 11_000n, 0n, clientShareAccount("writtenOff"))
    expect(net(writtenOff.movements, Accounts.channelLosses)).toBe(-11_000n)
    expect(net(resolve(money, 11_000n, 0n, clientShareAccount(undefined)).movements, Accounts.refundsPayable)).toBe(-11_000n)
  })

  it("a later release repays an outstanding debt before crediting available", () => {
    const movements = releaseWithDebt("a", 8_500n, 2_000n)
    expect(net(movements, Accounts.agentDebt("a"))).toBe(-2_000n)
    expect(net(movements, Accounts.agentAvailable("a"))).toBe(-6_500n)
    expect(net(releaseWithDebt("a", 8_500n, 0n), Accounts.agentAvailable("a"))).toBe(-8_500n)
  })
})

describe("dispute machine", () => {
  const start = startMachine(disputeMachine, { respondBy: 1_000 })

  it("opens with the 48-hour timer armed and escalates only when the agent did not respond", () => {
    expect(start.state).toBe("open")
    expect(actionsOf(start, "scheduleResponseDue")).toEqual([{ at: 1_000 }])
    const escalated = stepMachine(disputeMachine, start.persisted, { type: "RESPONSE_DUE", at: 1_000 })
    expect(escalated.state).toBe("escalated")
    expect(escalated.actions.map((a) => a.type)).toContain("recordEscalation")
    const responded = stepMachine(disputeMachine, start.persisted, { type: "AGENT_RESPONDED", at: 500 })
    expect(responded.actions.map((a) => a.type)).toContain("cancelResponseDue")
    expect(stepMachine(disputeMachine, responded.persisted, { type: "RESPONSE_DUE", at: 1_000 }).changed).toBe(false)
  })

  it("resolves once: each resolution settles, moves reputation by its delta, and a resolved dispute takes no event", () => {
    const cases = [
      ["resolved_agent", 2, "0"],
      ["resolved_client", -5, "11000"],
      ["resolved_split", 0, "2750"]
    ] as const
    for (const [resolution, delta, share] of cases) {
      const done = stepMachine(disputeMachine, start.persisted, { type: "RESOLVE", at: 2, resolution, clientShare: share, notes: "", by: "operator" })
      expect(done.state).toBe(resolution)
      expect(actionsOf(done, "settle")).toEqual([{ clientShare: resolution === "resolved_agent" ? "0" : share }])
      expect(actionsOf(done, "adjustReputation")).toEqual(delta === 0 ? [] : [{ delta }])
      const again = stepMachine(disputeMachine, done.persisted, { type: "RESOLVE", at: 3, resolution: "resolved_client", clientShare: "11000", notes: "", by: "operator" })
      expect(again.changed).toBe(false)
    }
  })
})
