// The strength rule for OPERATOR_TOKEN outside the devnet: random tokens of the recommended shapes pass, short or repetitive ones do not.
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { estimatedBits, tokenWeakness } from "../../src/domain/tokenStrength.js"

describe("operator token strength", () => {
  it("accepts random tokens of the recommended shapes (openssl rand -base64 32, -hex 32)", () => {
    for (let i = 0; i < 200; i++) {
      expect(tokenWeakness("OPERATOR_TOKEN", randomBytes(32).toString("base64"))).toBeUndefined()
      expect(tokenWeakness("OPERATOR_TOKEN", randomBytes(32).toString("hex"))).toBeUndefined()
    }
  })

  it("refuses short, repeated and patterned tokens, saying why in one line", () => {
    expect(tokenWeakness("OPERATOR_TOKEN", "test-operator-token-0123456789")).toContain("this one has 30 characters")
    expect(estimatedBits("a".repeat(64))).toBe(0)
    expect(tokenWeakness("OPERATOR_TOKEN", "a".repeat(64))).toBeDefined()
    expect(tokenWeakness("OPERATOR_TOKEN", "Abc1".repeat(16))).toBeDefined()
    expect(tokenWeakness("OPERATOR_TOKEN", "operator-token-2026-operator-token")).toBeDefined()
    expect(tokenWeakness("OPERATOR_TOKEN", randomBytes(800).toString("base64"))).toContain("32 to 1024 characters")
    expect(tokenWeakness("OPERATOR_TOKEN", "x".repeat(40))?.split("\n")).toHaveLength(1)
  })
})
