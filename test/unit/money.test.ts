import { describe, expect, it } from "@effect/vitest"
import { Option, Schema } from "effect"
import { formatUsdc, parseUsdc, splitAgentFee, Usdc } from "../../src/domain/Money.js"
import { earnedTier, settlementPolicy } from "../../src/domain/Trust.js"
import { isPrivateAddress } from "../../layers/UrlGuard.js"

describe("money at the edge", () => {
  it("parses decimal strings into exact micro-USDC", () => {
    expect(parseUsdc("0.10")).toEqual(Option.some(100_000n))
    expect(parseUsdc("10000")).toEqual(Option.some(10_000_000_000n))
    expect(parseUsdc("0.000001")).toEqual(Option.some(1n))
    expect(parseUsdc("123456789012.5")).toEqual(Option.some(123_456_789_012_500_000n))
    for (const bad of ["", ".5", "1.", "1.0000001", "-1", "+1", "1e3", "0x10", " 1", "01", "1,5", "NaN", "Infinity"]) {
      expect(Option.isNone(parseUsdc(bad)), bad).toBe(true)
    }
  })

  it("formats micro-USDC with exactly six decimals and round-trips", () => {
    expect(formatUsdc(100_000n)).toBe("0.100000")
    expect(formatUsdc(0n)).toBe("0.000000")
    expect(formatUsdc(-1_500n)).toBe("-0.001500")
    for (const micros of [1n, 999_999n, 1_000_000n, 123_456_789n]) {
      expect(Schema.decodeSync(Usdc)(Schema.encodeSync(Usdc)(micros))).toBe(micros)
    }
  })

  it("splits an agent fee 15/85 without losing a micro-USDC", () => {
    expect(splitAgentFee(10_000n)).toEqual({ platformCut: 1_500n, agentEarnings: 8_500n })
    expect(splitAgentFee(100n)).toEqual({ platformCut: 15n, agentEarnings: 85n })
    for (const fee of [1n, 7n, 333n, 10_000_000_000n]) {
      const { agentEarnings, platformCut } = splitAgentFee(fee)
      expect(agentEarnings + platformCut).toBe(fee)
      expect(platformCut).toBe((fee * 15n) / 100n)
    }
  })
})

describe("trust tiers", () => {
  const day = 24 * 60 * 60 * 1000
  const now = Date.UTC(2026, 10, 22)
  const agent = (completed: number, reputation: number, ageDays: number) => ({
    completedExecutions: BigInt(completed),
    reputationScore: reputation,
    createdAt: new Date(now - ageDays * day),
    trustTierOverride: null
  })

  it("a new agent settles delayed at least through the 24-hour dispute window", () => {
    expect(earnedTier(agent(0, 50, 0), now)).toBe("new")
    expect(settlementPolicy("new")).toEqual({ settlementType: "delayed", settlementDelay: "24h", delayMs: day })
  })

  it("tiers are earned by volume, reputation and age together", () => {
    expect(earnedTier(agent(100, 70, 7), now)).toBe("trusted")
    expect(earnedTier(agent(100, 69, 7), now)).toBe("new")
    expect(earnedTier(agent(5_000, 95, 6), now)).toBe("new")
    expect(earnedTier(agent(1_000, 90, 30), now)).toBe("premium")
    expect(earnedTier({ ...agent(0, 0, 0), trustTierOverride: "premium" }, now)).toBe("premium")
    expect(settlementPolicy("premium").settlementType).toBe("instant")
  })
})

describe("outbound URL policy", () => {
  it("treats loopback, private, link-local, CGNAT, mapped and reserved addresses as private", () => {
    for (const ip of ["127.0.0.1", "10.0.0.5", "172.16.3.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "::1", "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "224.0.0.1", "not-an-ip"]) {
      expect(isPrivateAddress(ip), ip).toBe(true)
    }
    for (const ip of ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) {
      expect(isPrivateAddress(ip), ip).toBe(false)
    }
  })
})
