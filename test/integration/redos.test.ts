// An agent's inputSchema runs on unpaid input: its patterns must not be able to stall the server (issue 15, ReDoS).
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount } from "../support/clients.js"
import { registration } from "../support/fixtures.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, registerAgent } from "../support/scenario.js"

layer(TestApp(), { excludeTestServices: true })("schema patterns before payment", (it) => {
  it.scoped("a backtracking pattern in an agent's inputSchema cannot stall the server: the unpaid near miss is refused at once", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const inputSchema = { type: "object", properties: { text: { type: "string", pattern: "^(a+)+$" } }, required: ["text"] }
      const agentId = yield* registerAgent(devAccount(1), agent.url, { capabilities: [echoCapability({ inputSchema })] })
      const started = performance.now()
      // ~2^31 backtracking steps on a backtracking engine (2.4 s at 30 characters, doubling per character).
      const refused = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, {
          method: "POST",
          json: { targetAgentId: agentId, capabilityId: "echo", input: { text: `${"a".repeat(31)}!` } }
        }))
      expect(performance.now() - started).toBeLessThan(1_000)
      expect(refused.status).toBe(400)
      expect(refused.body.error?.details.issues).toEqual([{ path: "input.text", message: 'must match pattern "^(a+)+$"' }])
      const matching = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/execute`, { method: "POST", json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "aaaa" } } }))
      expect(matching.status).toBe(402)
      expect(agent.calls).toHaveLength(0)

      // A pattern RE2 cannot run is refused when the agent is registered, before any payment.
      const lookahead = yield* Effect.promise(() =>
        call(`${baseUrl}/api/v1/agents`, {
          method: "POST",
          json: registration(devAccount(9), { capabilities: [echoCapability({ inputSchema: { type: "string", pattern: "^(?=a)a+$" } })] })
        }))
      expect(lookahead.status).toBe(400)
      expect(lookahead.body.error?.code).toBe("VALIDATION_ERROR")
      expect(JSON.stringify(lookahead.body.error?.details)).toMatch(/capabilities\.0\.inputSchema.*not supported: patterns run on RE2/)
    }))
})
