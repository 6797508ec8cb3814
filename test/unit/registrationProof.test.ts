// The registration proof's pure parts: what the digest binds, and the signature's time window (driven by TestClock).
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { privateKeyToAccount } from "viem/accounts"
import { registrationDigest, registrationTypedData, verifyRegistrationProof } from "../../services/agents/registrationProof.js"

const owner = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
const body = {
  wallet: owner.address,
  name: "Summarizer",
  capabilities: [{ id: "s", name: "S", description: "", pricing: { model: "per-request", basePrice: "0.01", currency: "USDC" } }],
  endpoints: { execution: "https://agent.example/execute" },
  tags: ["NLP"]
}

describe("registration proof", () => {
  it("the digest binds every field as sent, whatever the key order, and leaves walletProof out", () => {
    const reordered = { tags: ["NLP"], endpoints: { execution: "https://agent.example/execute" }, capabilities: body.capabilities, name: "Summarizer", wallet: owner.address }
    expect(registrationDigest(reordered)).toBe(registrationDigest(body))
    expect(registrationDigest({ ...body, walletProof: { signature: "0x", issuedAt: 1 } })).toBe(registrationDigest(body))
    for (const changed of [{ ...body, tags: ["nlp"] }, { ...body, endpoints: { execution: "https://squatter.example/x" } }, { ...body, metadata: {} }]) {
      expect(registrationDigest(changed)).not.toBe(registrationDigest(body))
    }
  })

  it.effect("a proof is good from its issuedAt for 5 minutes, and 30 seconds ahead of our clock", () =>
    Effect.gen(function* () {
      const issuedAt = 1_800_000_000_000
      const signature = yield* Effect.promise(() => owner.signTypedData(registrationTypedData(body, issuedAt, 84532)))
      const check = verifyRegistrationProof(body, body, { signature, issuedAt }, 84532)
      yield* TestClock.setTime(issuedAt - 30_000)
      yield* check
      yield* TestClock.setTime(issuedAt + 5 * 60_000)
      yield* check
      yield* TestClock.adjust(1)
      expect((yield* Effect.flip(check)).code).toBe("WALLET_PROOF_EXPIRED")
      yield* TestClock.setTime(issuedAt - 30_001)
      expect((yield* Effect.flip(check)).code).toBe("WALLET_PROOF_EXPIRED")
      yield* TestClock.setTime(issuedAt)
      expect((yield* Effect.flip(verifyRegistrationProof(body, body, { signature, issuedAt }, 1))).code).toBe("WALLET_PROOF_INVALID")
      expect((yield* Effect.flip(verifyRegistrationProof({ ...body, tags: [] }, body, { signature, issuedAt }, 84532))).code).toBe("WALLET_PROOF_INVALID")
    }))
})
