// The paid path's final transaction (issue 13): the outcome and the settlement are recorded as one batch, the answer
// is built from the rows the transaction stepped (no reload), and escrow.released carries the agent's balance read in
// the batch itself, right under concurrency.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { call, devAccount } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, execute, registerAgent } from "../support/scenario.js"

const EARNINGS = 8_500n // 85% of the 0.01 capability price

layer(TestApp({ BACKGROUND_WORKERS: "false", RATE_LIMIT_CLIENT_PER_WINDOW: "1000", RATE_LIMIT_AGENT_PER_WINDOW: "1000" }), { excludeTestServices: true })(
  "paid path",
  (it) => {
    it.scoped("8 concurrent calls to one agent: each escrow.released states the balance after its own release, exactly", () =>
      Effect.gen(function* () {
        const { sql, baseUrl } = yield* TestEnv
        const agent = yield* fakeAgent("echo")
        const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
        const responses = yield* Effect.all(
          Array.from({ length: 8 }, (_, i) => execute(devAccount(2 + (i % 4)), { targetAgentId: agentId, capabilityId: "echo", input: { text: `c${i}` } })),
          { concurrency: "unbounded" }
        )
        expect(responses.map((r) => [r.status, r.body.data?.status, r.body.data?.settlement?.status])).toEqual(
          Array.from({ length: 8 }, () => [200, "completed", "settled"])
        )
        const released = yield* sql<{ payload: { newAvailableBalance: string; amount: string } }>`
          SELECT payload FROM outbox_events WHERE agent_id = ${agentId} AND event_type = 'escrow.released'`
        const balances = released.map((e) => e.payload.newAvailableBalance).sort()
        expect(balances).toEqual(Array.from({ length: 8 }, (_, k) => `0.${(EARNINGS * BigInt(k + 1)).toString().padStart(6, "0")}`).sort())
        expect(released.every((e) => e.payload.amount === "0.008500")).toBe(true)
        expect((yield* balanceOf(agentId)).body.data).toMatchObject({ available: "0.068000" })
        expect(yield* sql`SELECT * FROM ledger_unbalanced_transfers`).toEqual([])

        // The answer built from the stepped rows is what a read of the execution gives.
        for (const response of responses) {
          const used = response.headers.get("x-payment-used") ?? ""
          const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/execute/${response.body.data.requestId}`, { headers: { "X-PAYMENT": used } }))
          expect(read.body.data).toEqual(response.body.data)
          expect(response.body.data.settlement.txHash).toMatch(/^0x[0-9a-f]{64}$/)
        }
      }))
  }
)
