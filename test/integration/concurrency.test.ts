import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { call, devAccount, TREASURY, usdcBalance } from "../support/clients.js"
import { fakeAgent } from "../support/agents.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { balanceOf, execute, registerAgent, ledgerMatchesChain } from "../support/scenario.js"

const PRICE = 11_000n

layer(TestApp({ RATE_LIMIT_CLIENT_PER_WINDOW: "1000", RATE_LIMIT_AGENT_PER_WINDOW: "1000" }), { excludeTestServices: true })("money under concurrency", (it) => {
  it.scoped("50 concurrent paid executions: each settled once, ledger balanced, on-chain treasury matches the ledger", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const ledger = yield* Ledger
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(1), agent.url, { tier: "premium" })
      const chainBefore = yield* Effect.promise(() => usdcBalance(TREASURY))
      const ledgerBefore = yield* ledger.balance(Accounts.treasury)
      const payers = [2, 3, 4, 5, 6, 7, 8, 9].map(devAccount)
      const responses = yield* Effect.all(
        Array.from({ length: 50 }, (_, i) => execute(payers[i % payers.length]!, { targetAgentId: agentId, capabilityId: "echo", input: { text: `n${i}` } })),
        { concurrency: "unbounded" }
      )
      expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200))
      expect(new Set(responses.map((r) => r.body.data.requestId)).size).toBe(50)
      expect(responses.every((r) => r.body.data.settlement.status === "settled")).toBe(true)
      // Settlements are group-committed (docs/settlement.md): payments may share a transaction; each carries the hash of
      // the treasury transaction that paid it.
      const linked = yield* sql<{ txHash: string; treasuryHash: string }>`
        SELECT p.tx_hash, t.tx_hash AS treasury_hash FROM payments p JOIN treasury_txs t ON t.id = p.treasury_tx_id
        WHERE p.purpose = 'execution' AND p.subject_id IN ${sql.in(responses.map((r) => String(r.body.data.requestId)))}`
      expect(linked).toHaveLength(50)
      expect(linked.every((l) => l.txHash === l.treasuryHash)).toBe(true)
      const chainAfter = yield* Effect.promise(() => usdcBalance(TREASURY))
      const ledgerAfter = yield* ledger.balance(Accounts.treasury)
      expect(chainAfter - chainBefore).toBe(50n * PRICE)
      expect(ledgerAfter - ledgerBefore).toBe(50n * PRICE)
      expect(yield* sql`SELECT * FROM ledger_unbalanced_transfers`).toEqual([])
      const [settled] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM payments WHERE purpose = 'execution' AND status = 'settled'`
      expect(settled?.n).toBe(50)
      // Every escrow released exactly once: escrow nets to zero, the agent got 85% of 50 calls.
      expect(yield* ledger.balance(Accounts.escrow)).toBe(0n)
      expect(yield* ledger.balance(Accounts.settlementReceivable)).toBe(0n)
      expect((yield* balanceOf(agentId)).body.data.available).toBe("0.425000")
      expect(agent.calls).toHaveLength(50)
    }))

  it.scoped("20 concurrent identical idempotent requests: one charge, one agent call, one result for all", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent({ kind: "delay", ms: 150, then: "echo" })
      const agentId = yield* registerAgent(devAccount(2), agent.url, { tier: "premium" })
      const payer = devAccount(3)
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const body = { targetAgentId: agentId, capabilityId: "echo", input: { text: "once" }, idempotencyKey: "order-42" }
      const responses = yield* Effect.all(Array.from({ length: 20 }, () => execute(payer, body)), { concurrency: "unbounded" })
      expect(responses.every((r) => r.status === 200)).toBe(true)
      expect(new Set(responses.map((r) => r.body.data.requestId)).size).toBe(1)
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)
      expect(agent.calls).toHaveLength(1)

      // A later repeat returns the cached result, charges nothing new.
      const repeat = yield* execute(payer, body)
      expect(repeat.body.data).toMatchObject({ requestId: responses[0]!.body.data.requestId, status: "completed", output: { echo: { text: "once" } } })
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)

      // Same key, different input: conflict, nothing charged.
      const conflict = yield* execute(payer, { ...body, input: { text: "twice" } })
      expect(conflict.status).toBe(409)
      expect(conflict.body.error?.code).toBe("IDEMPOTENCY_CONFLICT")
      expect(before - (yield* Effect.promise(() => usdcBalance(payer.address)))).toBe(PRICE)

      // The key is scoped to the payer: another payer may use the same key.
      const other = yield* execute(devAccount(4), body)
      expect(other.status).toBe(200)
      expect(other.body.data.requestId).not.toBe(responses[0]!.body.data.requestId)
    }))

  it.scoped("after five failures the circuit opens: calls fail fast with 503 and Retry-After, nothing charged", () =>
    Effect.gen(function* () {
      const { baseUrl } = yield* TestEnv
      const agent = yield* fakeAgent({ kind: "json", status: 503, body: { error: "down" } })
      const agentId = yield* registerAgent(devAccount(5), agent.url, { tier: "premium" })
      const payer = devAccount(6)
      for (let i = 0; i < 5; i++) {
        const failed = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "x" } })
        expect(failed.status).toBe(502)
      }
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const fast = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "x" } })
      expect(fast.status).toBe(503)
      expect(fast.body.error?.code).toBe("AGENT_UNAVAILABLE")
      expect(Number(fast.headers.get("retry-after"))).toBeGreaterThan(0)
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect(agent.calls).toHaveLength(5)
      const read = yield* Effect.promise(() => call(`${baseUrl}/api/v1/agents/${agentId}`))
      expect(read.body.data.circuitState).toBe("open")
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})

// A day-long window: on the real clock a 60 s window's boundary between two calls restarts the count (seen once in CI).
layer(TestApp({ RATE_LIMIT_CLIENT_PER_WINDOW: "2", RATE_LIMIT_AGENT_PER_WINDOW: "100", RATE_LIMIT_WINDOW_SECONDS: "86400" }), { excludeTestServices: true })("rate limits", (it) => {
  it.scoped("a client over its window gets 429 with Retry-After and is not charged; remaining counts are in the headers", () =>
    Effect.gen(function* () {
      const agent = yield* fakeAgent("echo")
      const agentId = yield* registerAgent(devAccount(7), agent.url, { tier: "premium" })
      const payer = devAccount(8)
      const first = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "1" } })
      expect(first.status).toBe(200)
      expect(first.headers.get("x-ratelimit-client-remaining")).toBe("1")
      expect(Number(first.headers.get("x-ratelimit-agent-remaining"))).toBe(99)
      const second = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "2" } })
      expect(second.status).toBe(200)
      expect(second.headers.get("x-ratelimit-client-remaining")).toBe("0")
      const before = yield* Effect.promise(() => usdcBalance(payer.address))
      const third = yield* execute(payer, { targetAgentId: agentId, capabilityId: "echo", input: { text: "3" } })
      expect(third.status).toBe(429)
      expect(third.body.error?.code).toBe("RATE_LIMITED")
      expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0)
      expect(third.headers.get("x-ratelimit-client-remaining")).toBe("0")
      expect(yield* Effect.promise(() => usdcBalance(payer.address))).toBe(before)
      expect(agent.calls).toHaveLength(2)
      // Another client still gets through.
      const other = yield* execute(devAccount(9), { targetAgentId: agentId, capabilityId: "echo", input: { text: "4" } })
      expect(other.status).toBe(200)
      // The refused call counted nothing (its reservation statement aborted whole): the agent's window holds three calls.
      expect(Number(other.headers.get("x-ratelimit-agent-remaining"))).toBe(97)
    }))

  it.effect("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", () =>
    Effect.gen(function* () {
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
