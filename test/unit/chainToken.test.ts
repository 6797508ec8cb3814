import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import { randomBytes } from "node:crypto"
import { CHAIN_TOKEN_TTL_MS, type ChainTokenPayload, cycleOf, signChainToken, verifyChainToken } from "../../services/chains/token.js"

const key = randomBytes(32)
const now = 1_800_000_000_000
const payload: ChainTokenPayload = {
  cid: "2b1f4c8e-7a4d-4c5e-9f1a-0b2c3d4e5f60",
  d: 1,
  md: 3,
  rb: "4.989000",
  tb: "5.000000",
  pa: "agent-a",
  rw: "0x70997970c51812dc3a010c7d01b50e0d17dc79c8",
  sa: "2027-01-15T08:00:00.000Z",
  exp: now + CHAIN_TOKEN_TTL_MS,
  cc: ["agent-a"],
  pe: "req_0123456789abcdef"
}

describe("chain token", () => {
  it("round-trips a signed payload", () => {
    expect(verifyChainToken(key, signChainToken(key, payload), now)).toEqual(Either.right(payload))
  })

  it("refuses a token changed in any single byte (to any other base64url character), signed with another key, or malformed", () => {
    const token = signChainToken(key, payload)
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    for (let i = 0; i < token.length; i++) {
      if (token[i] === ".") continue
      for (const c of alphabet) {
        if (c === token[i]) continue
        const tampered = token.slice(0, i) + c + token.slice(i + 1)
        expect(Either.isLeft(verifyChainToken(key, tampered, now)), `byte ${i} → ${c}`).toBe(true)
      }
    }
    expect(Either.getLeft(verifyChainToken(randomBytes(32), token, now))).toMatchObject({ _tag: "Some", value: { reason: "invalid" } })
    for (const garbage of ["", ".", "abc", "a.b.c", "😀.😀", "x".repeat(5_000)]) {
      expect(Either.getLeft(verifyChainToken(key, garbage, now)), garbage.slice(0, 10)).toMatchObject({ _tag: "Some", value: { reason: "invalid" } })
    }
  })

  it("a signed payload of the wrong shape is invalid, not trusted", () => {
    const forged = signChainToken(key, { ...payload, d: 9 } as unknown as ChainTokenPayload)
    expect(Either.getLeft(verifyChainToken(key, forged, now))).toMatchObject({ _tag: "Some", value: { reason: "invalid" } })
  })

  it("expires 30 seconds after it was issued", () => {
    const token = signChainToken(key, payload)
    expect(Either.isRight(verifyChainToken(key, token, now + CHAIN_TOKEN_TTL_MS - 1))).toBe(true)
    expect(Either.getLeft(verifyChainToken(key, token, now + CHAIN_TOKEN_TTL_MS))).toMatchObject({ _tag: "Some", value: { reason: "expired" } })
  })

  it("names the cycle a call would close (A → B → A)", () => {
    const atB = { ...payload, cc: ["agent-a", "agent-b"] }
    expect(cycleOf(atB, "agent-a")).toEqual(["agent-a", "agent-b", "agent-a"])
    expect(cycleOf(atB, "agent-c")).toBeNull()
  })
})
