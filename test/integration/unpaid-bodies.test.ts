// Large bodies before anything is known about the caller, as the attack itself: one address sends ~1 MB bodies without
// paying. Above UNPAID_BODY_FREE_BYTES (64 KiB) a body counts against its address's UNPAID_BODY_BYTES_PER_MINUTE (8 MiB),
// reserved before it is read and given back when the request succeeds. Past the budget the next large body is answered
// 429 RATE_LIMITED with Retry-After without being read (a broken body gets 429, not 400 INVALID_JSON); small bodies from
// the same address, other addresses, and a paid large call that succeeded are not affected. (TRUST_PROXY: the proxy's
// X-Forwarded-For names the client, so one test plays several.)
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, devAccount, signPayment } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { registerAgent } from "../support/scenario.js"

const BUDGET = 8 * 1024 * 1024
const SIZE = 1_040_000

/** An execute body of exactly `size` bytes (a long echo text), or a broken one of that size. */
const bodyOf = (agentId: string, size: number, broken = false) => {
  const frame = JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "" } })
  const text = JSON.stringify({ targetAgentId: agentId, capabilityId: "echo", input: { text: "x".repeat(size - frame.length) } })
  return broken ? `${text.slice(0, -2)}!!` : text
}

const post = (address: string, body: string, headers: Record<string, string> = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(async () => {
      const response = await fetch(`${baseUrl}/api/v1/execute`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": address, ...headers },
        body
      })
      return { status: response.status, retryAfter: response.headers.get("retry-after"), body: (await response.json()) as { success: boolean; error?: { code: string; message: string } } }
    }))

layer(TestApp({ BACKGROUND_WORKERS: "false", TRUST_PROXY: "true", RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }), { excludeTestServices: true })("unpaid bodies", (it) => {
  it.scoped("an address that sent 8 MiB of large bodies without a success gets 429 for the next, unread; small bodies, other addresses and a paid large call go on", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(devAccount(3), agent.url)
      const attacker = "203.0.113.80"

      // A paid large call from the address succeeds and gives its bytes back (the payment sent at once: no 402 probe).
      const { header } = yield* Effect.promise(() => signPayment({ account: devAccount(9), value: 11_000n }))
      const paid = yield* post(attacker, bodyOf(agentId, 100_000), { "X-PAYMENT": header })
      expect(paid.status, JSON.stringify(paid.body).slice(0, 600)).toBe(200)

      for (let i = 0; i < Math.floor(BUDGET / SIZE); i++) expect((yield* post(attacker, bodyOf(agentId, SIZE))).status).toBe(402)
      const refused = yield* post(attacker, bodyOf(agentId, SIZE, true))
      expect(refused.status).toBe(429)
      expect(refused.body).toMatchObject({ success: false, error: { code: "RATE_LIMITED" } })
      expect(refused.body.error?.message).toContain("nothing was read or charged")
      expect(Number(refused.retryAfter)).toBeGreaterThan(0)
      expect(Number(refused.retryAfter)).toBeLessThanOrEqual(60)

      // A body within the free size from the same address, and a large one from another address, are read as usual.
      expect((yield* post(attacker, bodyOf(agentId, 60_000))).status).toBe(402)
      expect((yield* post("198.51.100.80", bodyOf(agentId, SIZE, true))).body.error?.code).toBe("INVALID_JSON")
    }))
})
