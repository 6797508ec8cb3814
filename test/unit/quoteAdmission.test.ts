// Who may make the marketplace ask an agent for a quote: unverified callers share a small part of each agent's slots,
// every client (a verified payer, or else an address, an IPv6 one by its /64) has a few in flight per agent and a budget
// per window, and a payer's slots are never taken by unverified callers.
import { describe, expect, it } from "vitest"
import { addressKey, makeQuoteAdmission, type QuoteAdmissionOptions } from "../../services/executions/quoteAdmission.js"

const options: QuoteAdmissionOptions = {
  maxInFlightPerAgent: 16,
  maxUnverifiedInFlightPerAgent: 4,
  maxInFlightPerClient: 2,
  perClientPerWindow: 30,
  windowMs: 60_000,
  maxClients: 1_000,
  quoteTimeoutMs: 5_000
}
const anon = (address: string) => ({ verified: false, address }) as const
const payer = (address: string) => ({ verified: true, payer: address }) as const

describe("quote admission", () => {
  it("sixteen unverified callers get the unverified share (4) of an agent's slots; payers still get the other 12", () => {
    const gate = makeQuoteAdmission(options)
    const strangers = Array.from({ length: 16 }, (_, i) => gate.admit("a1", anon(`10.0.0.${i + 1}`), 1_000)._tag)
    expect(strangers.filter((t) => t === "Admitted")).toHaveLength(4)
    expect(strangers.slice(4).every((t) => t === "Busy")).toBe(true)
    const payers = Array.from({ length: 13 }, (_, i) => gate.admit("a1", payer(`0x${String(i).padStart(40, "0")}`), 1_000)._tag)
    expect(payers.slice(0, 12).every((t) => t === "Admitted")).toBe(true)
    // All 16 slots taken: the 13th payer waits for one; another agent is not affected.
    expect(payers[12]).toBe("Busy")
    expect(gate.admit("a2", anon("10.0.0.1"), 1_000)._tag).toBe("Admitted")
  })

  it("a client has at most maxInFlightPerClient quotes in flight to one agent (429 in_flight, Retry-After the quote timeout); released, it may ask again", () => {
    const gate = makeQuoteAdmission(options)
    const first = gate.admit("a1", anon("10.0.0.1"), 0)
    expect(gate.admit("a1", anon("10.0.0.1"), 0)._tag).toBe("Admitted")
    expect(gate.admit("a1", anon("10.0.0.1"), 0)).toEqual({ _tag: "OverLimit", limit: "in_flight", retryAfterSeconds: 5 })
    expect(gate.admit("a2", anon("10.0.0.1"), 0)._tag).toBe("Admitted")
    if (first._tag !== "Admitted") throw new Error("not admitted")
    first.release()
    first.release() // twice is once
    expect(gate.admit("a1", anon("10.0.0.1"), 0)._tag).toBe("Admitted")
    expect(gate.inFlight("a1")).toBe(2)
  })

  it("a client's budget per window counts the quotes it caused (all agents), refused with the seconds left in the window; the next window starts afresh", () => {
    const gate = makeQuoteAdmission({ ...options, perClientPerWindow: 3 })
    for (const agent of ["a1", "a2", "a3"]) {
      const admitted = gate.admit(agent, anon("10.0.0.9"), 60_000)
      if (admitted._tag === "Admitted") admitted.release()
      expect(admitted._tag).toBe("Admitted")
    }
    expect(gate.admit("a4", anon("10.0.0.9"), 75_500)).toEqual({ _tag: "OverLimit", limit: "rate", retryAfterSeconds: 45 })
    expect(gate.admit("a4", anon("10.0.0.10"), 75_500)._tag).toBe("Admitted")
    expect(gate.admit("a4", anon("10.0.0.9"), 120_000)._tag).toBe("Admitted")
  })

  it("a payer is its own client wherever it calls from, and an address is not a payer", () => {
    const gate = makeQuoteAdmission(options)
    const wallet = "0xAbC0000000000000000000000000000000000001"
    expect(gate.admit("a1", payer(wallet), 0)._tag).toBe("Admitted")
    expect(gate.admit("a1", payer(wallet.toLowerCase()), 0)._tag).toBe("Admitted")
    expect(gate.admit("a1", payer(wallet), 0)._tag).toBe("OverLimit")
    expect(gate.admit("a1", anon(wallet), 0)._tag).toBe("Admitted")
  })

  it("an IPv6 address counts by its /64 (IPv4-mapped addresses as IPv4); past maxClients a new unverified client is answered busy, a payer still counted", () => {
    expect(addressKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64")
    expect(addressKey("2001:0db8:0001:0002:ffff:ffff:ffff:ffff")).toBe("2001:db8:1:2::/64")
    expect(addressKey("2001:db8::1")).toBe("2001:db8:0:0::/64")
    expect(addressKey("::ffff:10.1.2.3")).toBe("10.1.2.3")
    expect(addressKey("10.1.2.3")).toBe("10.1.2.3")
    const gate = makeQuoteAdmission({ ...options, maxClients: 2, maxUnverifiedInFlightPerAgent: 16 })
    expect(gate.admit("a1", anon("2001:db8:1:2::1"), 0)._tag).toBe("Admitted")
    expect(gate.admit("a1", anon("2001:db8:1:2::2"), 0)._tag).toBe("Admitted")
    expect(gate.admit("a1", anon("2001:db8:1:2::3"), 0)._tag).toBe("OverLimit")
    expect(gate.admit("a1", anon("10.0.0.1"), 0)._tag).toBe("Admitted")
    expect(gate.admit("a1", anon("10.0.0.2"), 0)._tag).toBe("Busy")
    expect(gate.admit("a1", payer("0x0000000000000000000000000000000000000001"), 0)._tag).toBe("Admitted")
  })
})
