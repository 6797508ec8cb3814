// Clients that hold connections: a body that never finishes, headers that never end. Each connection is closed after
// HTTP_REQUEST_TIMEOUT_MS instead of Node's 300 s, while a slow agent (time after the request arrived) is not cut off.
// Forwarded headers are not trusted without TRUST_PROXY: a forged X-Forwarded-For does not make a new client.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { connect } from "node:net"
import { devAccount, paidCall } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { fakeAgent } from "../support/agents.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

/** Sends `text` on a raw connection and resolves when the server closes it: what came back and after how long. */
const holdOpen = (baseUrl: string, text: string) =>
  Effect.promise(() =>
    new Promise<{ readonly reply: string; readonly ms: number }>((resolve, reject) => {
      const { hostname, port } = new URL(baseUrl)
      const started = Date.now()
      let reply = ""
      const socket = connect(Number(port), hostname, () => socket.write(text))
      socket.setEncoding("utf8")
      socket.on("data", (chunk: string) => (reply += chunk))
      socket.on("error", reject)
      socket.on("close", () => resolve({ reply, ms: Date.now() - started }))
      // The test's own bound: a server that never closes fails the test instead of hanging it.
      setTimeout(() => socket.destroy(), 15_000).unref()
    }))

// A day-long rate-limit window: the test runs on the real clock, and a 60 s window's boundary falling between its two
// paid calls (~4 s apart) let the second through about one run in fifteen.
layer(TestApp({ HTTP_REQUEST_TIMEOUT_MS: "1500", RATE_LIMIT_CLIENT_PER_WINDOW: "1", RATE_LIMIT_WINDOW_SECONDS: "86400" }), { excludeTestServices: true })("slow clients", (it) => {
  it.scoped("a body that stops arriving is answered 408 and the connection closed after the request timeout", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { reply, ms } = yield* holdOpen(
        baseUrl,
        "POST /api/v1/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"targetAgentId\":"
      )
      expect(reply).toMatch(/^HTTP\/1\.1 408/)
      expect(ms).toBeGreaterThanOrEqual(1_400)
      expect(ms).toBeLessThan(5_000)
    }))

  it.scoped("headers that never end are cut off after a third of the request timeout", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const { ms } = yield* holdOpen(baseUrl, "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: a")
      expect(ms).toBeLessThan(4_000)
    }))

  it.scoped("an agent slower than the request timeout still answers: only the client's sending is bounded", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent({ kind: "delay", ms: 2_500, then: "echo" })
      const agentId = yield* registerAgent(devAccount(7), agent.url, { tier: "premium" })
      const response = yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text: "slow" } })
      expect(response.status).toBe(200)
      expect(response.body.data.output).toMatchObject({ echo: { text: "slow" } })

      // The payer is at its limit (1 per window): another X-Forwarded-For or X-Client-Id does not make it a new client.
      const { baseUrl } = yield* TestEnv
      const forged = yield* Effect.promise(() =>
        paidCall(devAccount(8), `${baseUrl}/api/v1/execute`, {
          json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "again" } },
          headers: { "X-Forwarded-For": "203.0.113.77", "X-Real-IP": "203.0.113.78", "X-Client-Id": "someone-else" }
        }))
      expect(forged.status).toBe(429)
      expect(forged.body.error?.code).toBe("RATE_LIMITED")
      expect(agent.calls).toHaveLength(1)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
