// The channel reconciliation's comparison: a row ahead of the chain's totalClaimed is a claim in flight, a chain ahead of
// the row or a balance that differs is drift, and only what disagreed the same way twice is confirmed.
import { describe, expect, it } from "vitest"
import { type ChannelMirror, compareChannels, pendingDrift, rowsPending, sameDrift } from "../../services/treasury/channelDrift.js"

const row = (id: string, balance: bigint, charged: bigint, claimed: bigint, settled = 0n): ChannelMirror =>
  ({ id, balance, chargedCumulative: charged, claimedCumulative: claimed, settledCumulative: settled })

describe("channel drift", () => {
  it("agreeing rows drift nothing; a claim built and not mined is in flight and keeps the pending pool in balance", () => {
    const rows = [row("0xa", 1_000n, 500n, 300n, 100n), row("0xb", 400n, 200n, 200n)]
    const chain = new Map([["0xa", { balance: 1_000n, totalClaimed: 300n }], ["0xb", { balance: 400n, totalClaimed: 0n }]])
    const c = compareChannels(rows, chain)
    expect(c).toEqual({ checked: 2, drifted: [], balanceDrift: 0n, claimedDrift: 0n, claimsInFlight: 200n })
    // The contract holds 200 claimed for us (300 − 100 settled); the rows say 400, of which 200 is in flight.
    expect(rowsPending(rows)).toBe(400n)
    expect(pendingDrift(200n, rowsPending(rows), c.claimsInFlight)).toBe(0n)
  })

  it("a chain ahead of our claimed cumulative, a differing balance and a channel the chain never saw are drift", () => {
    const rows = [row("0xa", 1_000n, 500n, 300n), row("0xb", 400n, 0n, 0n), row("0xc", 50n, 0n, 0n)]
    const chain = new Map([["0xa", { balance: 1_000n, totalClaimed: 450n }], ["0xb", { balance: 600n, totalClaimed: 0n }]])
    const c = compareChannels(rows, chain)
    expect(c.drifted.map((d) => d.channelId)).toEqual(["0xa", "0xb", "0xc"])
    expect(c).toMatchObject({ claimedDrift: 150n, balanceDrift: 200n - 50n, claimsInFlight: 0n })
    expect(pendingDrift(450n, rowsPending(rows), c.claimsInFlight)).toBe(150n)
  })

  it("only what drifted the same way at both looks is confirmed: a mirror that caught up is not", () => {
    const rows = [row("0xa", 1_000n, 0n, 0n), row("0xb", 400n, 0n, 0n)]
    const first = compareChannels(rows, new Map([["0xa", { balance: 1_200n, totalClaimed: 0n }], ["0xb", { balance: 500n, totalClaimed: 0n }]]))
    const again = compareChannels([row("0xa", 1_200n, 0n, 0n), rows[1]!], new Map([["0xa", { balance: 1_200n, totalClaimed: 0n }], ["0xb", { balance: 500n, totalClaimed: 0n }]]))
    expect(sameDrift(first, again).map((d) => d.channelId)).toEqual(["0xb"])
  })
})
