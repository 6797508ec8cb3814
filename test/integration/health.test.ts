import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { probeDueAgents } from "../../services/reputation/Reputation.js"
import { call, devAccount } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability } from "../support/scenario.js"
import { paidCall } from "../support/clients.js"
import { registration } from "../support/fixtures.js"

layer(TestApp({ BACKGROUND_WORKERS: "false", HEALTH_PROBE_INTERVAL_MS: "60000" }))("health probes", (it) => {
  it.scoped("agents with a health URL are probed once per interval; failures pull the health EMA down, recoveries lift it", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(Date.now())
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const owner = devAccount(1)
      const created = yield* Effect.promise(() =>
        paidCall(owner, `${baseUrl}/api/v1/agents`, {
          json: registration(owner, { capabilities: [echoCapability()], endpoints: { execution: agent.url, health: agent.healthUrl } })
        }))
      expect(created.status).toBe(201)
      const agentId: string = created.body.data.id
      const health = () => Effect.promise(() => call(`${baseUrl}/api/v1/agents/${agentId}`)).pipe(Effect.map((r) => r.body.data.health_score as number))

      agent.setHealth(503)
      expect(yield* probeDueAgents).toBe(1)
      expect(yield* health()).toBeCloseTo(0.9, 6)
      // Not due again within the interval.
      expect(yield* probeDueAgents).toBe(0)
      expect(agent.healthChecks()).toBe(1)

      yield* TestClock.adjust(60_000)
      yield* probeDueAgents
      expect(yield* health()).toBeCloseTo(0.81, 6)

      agent.setHealth(200)
      yield* TestClock.adjust(60_000)
      yield* probeDueAgents
      expect(yield* health()).toBeCloseTo(0.1 + 0.9 * 0.81, 6)
      expect(agent.healthChecks()).toBe(3)
    }))
})
