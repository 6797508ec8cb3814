// An RPC that refuses transactions for a few seconds: the settlement's first broadcast fails (every try of the
// transport), and its stored bytes are sent again while the receipt is awaited, so the paid calls settle in their own
// requests a block after the outage, not after the whole receipt wait and the worker's lease (which held every later
// settlement of the network behind them). Real clock: the resends are timed.
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { fakeAgent } from "../support/agents.js"
import { TestEnv } from "../support/harness.js"
import { appBehindRpcProxy, OwnChain, Proxy } from "../support/proxiedChain.js"
import { execute, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const PRICE = 11_000n
/** viem tries a send once: each call's first broadcast and two resends of it fail (about 4 s of outage). */
const REFUSED_SENDS = 6
const RECEIPT_WAIT_MS = 20_000

// No background work: whatever settles, settles in the paid request.
const App = appBehindRpcProxy({ BACKGROUND_WORKERS: "false", TREASURY_RECEIPT_WAIT_MS: String(RECEIPT_WAIT_MS), RATE_LIMIT_CLIENT_PER_WINDOW: "1000" }, 4)

layer(App, { excludeTestServices: true, timeout: 120_000 })("an RPC refusing transactions for seconds", (it) => {
  it.scoped("the settlements' bytes are sent again during the receipt wait: both calls settle in their requests, charged once", () =>
    Effect.gen(function* () {
      const own = yield* OwnChain
      const proxy = yield* Proxy
      const { sql } = yield* TestEnv
      const agent = yield* fakeAgent()
      const agentId = yield* registerAgent(own.payers[0]!, agent.url)
      const payers = [own.payers[1]!, own.payers[2]!]
      const before = yield* Effect.forEach(payers, (p) => Effect.promise(() => own.balanceOf(p.address)))
      const sendsBefore = proxy.counts()["eth_sendRawTransaction"] ?? 0

      proxy.burst({ _tag: "5xx", status: 503 }, REFUSED_SENDS, ["eth_sendRawTransaction"])
      const started = Date.now()
      const paid = yield* Effect.forEach(payers, (payer, i) =>
        execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: `outage ${i}` } }), { concurrency: "unbounded" })
      const ms = Date.now() - started

      for (const answer of paid) {
        expect(answer.status).toBe(200)
        expect(answer.body.data?.settlement?.status).toBe("settled")
      }
      // Settled within the wait, a few resends after the outage: not at its end.
      expect(ms).toBeLessThan(RECEIPT_WAIT_MS)
      expect((proxy.counts()["eth_sendRawTransaction"] ?? 0) - sendsBefore).toBeGreaterThan(REFUSED_SENDS)
      // The transaction whose first broadcast failed was recorded broadcast once its bytes went through.
      const events = yield* sql<{ events: string }>`
        SELECT string_agg(event_type, ',' ORDER BY id) AS events FROM machine_transitions
        WHERE machine = 'treasury' AND actor_id IN (SELECT treasury_tx_id FROM payments WHERE treasury_tx_id IS NOT NULL)
        GROUP BY actor_id`
      expect(events.some((e) => e.events.includes("BROADCAST_FAILED,BROADCAST,MINED"))).toBe(true)
      // Each payer paid once, the ledger equals the chain.
      const after = yield* Effect.forEach(payers, (p) => Effect.promise(() => own.balanceOf(p.address)))
      expect(after.map((a, i) => before[i]! - a)).toEqual([PRICE, PRICE])
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
