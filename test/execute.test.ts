import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { devAccount, TREASURY, usdcBalance } from "./support/clients.js"
import { fakeAgent } from "./support/agents.js"
import { TestApp, TestEnv } from "./support/harness.js"
import { balanceOf, execute, registerAgent } from "./support/scenario.js"

layer(TestApp(), { excludeTestServices: true })("paid execution", (it) => {
  it.scoped("a paid call reaches the agent, settles on chain and splits the money 0.001 + 15% / 85% to an instant agent", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const payer = devAccount(2)
      const payerBefore = yield* Effect.promise(() => usdcBalance(payer.address))
      const treasuryBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const response = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "hello" } })
      expect(response.status).toBe(200)
      expect(response.body.data).toMatchObject({
        status: "completed",
        output: { echo: { text: "hello" } },
        cost: { agentFee: "0.010000", platformFee: "0.001000", total: "0.011000" },
        settlement: { status: "settled" }
      })
      expect(response.headers.get("x-payment-used")).toBeTruthy()
      expect(response.headers.get("x-payment-response")).toBeTruthy()
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(payerBefore - 11_000n)
      expect(yield* Effect.promise(() => usdcBalance(TREASURY))).toBe(treasuryBefore + 11_000n)
      const balance = yield* balanceOf(agentId)
      expect(balance.body.data).toMatchObject({ available: "0.008500", pending: "0.000000", totalEarned: "0.008500", executionCount: 1 })
      const unbalanced = yield* sql`SELECT * FROM ledger_unbalanced_transfers`
      expect(unbalanced).toEqual([])
    }))
})
