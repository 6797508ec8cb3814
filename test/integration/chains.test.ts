// Chains end to end: a client pays a budget (x402-fetch, X-Chain-Budget); fake agents on loopback hire each other through
// the service with the X-Chain-Token they were sent; the tree, its cost and the ledger agree; the unspent budget comes
// back on chain once; every refusal happens before anything is reserved; concurrent sub-calls never overspend.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { CHAIN_TIMEOUT_MS } from "../../machines/chain.js"
import { MachineHost } from "../../machines/Host.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { type ChainedResult, fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, usdcBalance, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, ledgerMatchesChain, registerAgent } from "../support/scenario.js"

const CALL = 11_000n // 0.001 platform fee + 0.01 basePrice per call

/** Our clock starts at the real time (payments are signed against it), then only the test moves it. */
const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, {
        method: init.method ?? (init.json === undefined ? "GET" : "POST"),
        ...(init.json === undefined ? {} : { json: init.json }),
        headers: init.headers ?? {}
      })))

/** One agent per wallet: registered the first time, pointed at a new fake agent (and its settings reset) afterwards. */
const agentIds = new Map<string, string>()

/** An agent in the chain business at `url`: chaining on, depth 3, no caller lists, unless `settings` say otherwise. */
const chainAgent = (owner: PrivateKeyAccount, url: string, settings: Record<string, unknown> = {}, capabilities?: Array<unknown>) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const known = agentIds.get(owner.address)
    const id = known ?? (yield* registerAgent(owner, url, capabilities === undefined ? {} : { capabilities }))
    agentIds.set(owner.address, id)
    const patched = yield* Effect.promise(async () =>
      call(`${baseUrl}/api/v1/agents/${id}`, {
        method: "PATCH",
        headers: await walletAuth(owner, id),
        json: {
          endpoints: { execution: url },
          capabilities: capabilities ?? [echoCapability()],
          chainSettings: { chain_enabled: true, chain_max_depth: 3, chain_allowed_callers: [], chain_blocked_callers: [], ...settings }
        }
      }))
    if (patched.status !== 200) throw new Error(`agent update refused: ${JSON.stringify(patched.body)}`)
    return id
  })

/** A chain's root call paid by `payer` with the official x402 client. */
const startChain = (payer: PrivateKeyAccount, agentId: string, budget: string, text = "hi") =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      paidCall(payer, `${baseUrl}/api/v1/execute`, {
        json: { targetAgentId: agentId, capabilityId: "echo", input: { text } },
        headers: { "X-Chain-Budget": budget }
      })))

const echo = (targetAgentId: string, text: string) => ({ body: { targetAgentId, capabilityId: "echo", input: { text } } })

/** A sub-call made by hand with a token (the test acting as the agent that holds it). */
const chained = (token: string, body: Record<string, unknown>) => api("/api/v1/execute", { json: body, headers: { "X-Chain-Token": token } })

/** The token with one character of its payload changed. */
const tamper = (token: string) => `${token.slice(0, 10)}${token[10] === "A" ? "B" : "A"}${token.slice(11)}`

const chainOf = (key: string) => Effect.map(api(`/api/v1/chains/${key}`), (r) => r.body.data)

const usdc = (address: `0x${string}`) => Effect.promise(() => usdcBalance(address))

const reputationOf = (agentId: string) => Effect.map(api(`/api/v1/agents/${agentId}`), (r) => r.body.data.reputation_score as number)

const eventsOf = (chainId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    Effect.map(
      sql<{ eventType: string }>`SELECT event_type FROM outbox_events WHERE payload->>'chainId' = ${chainId} AND event_type LIKE 'chain.%' ORDER BY seq`,
      (rows) => rows.map((r) => r.eventType)
    ))

/** What the ledger says the chain's calls kept: their escrow holds, less what failed calls gave back or were refunded. */
const ledgerCostOf = (chainId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    Effect.map(
      sql<{ kept: string }>`
        SELECT COALESCE(-SUM(e.amount), 0)::text AS kept FROM ledger_entries e JOIN ledger_transfers t ON t.id = e.transfer_id
        WHERE e.account_id = 'escrow' AND t.subject_id IN (SELECT id FROM executions WHERE chain_id = ${chainId})
          AND t.kind IN ('escrow_hold', 'chain_spend', 'chain_return', 'refund_owed')`,
      (rows) => BigInt(rows[0]?.kept ?? "0")
    ))

/** The sub-call results a call-back agent put in its output. */
const subCalls = (output: unknown): Array<ChainedResult> =>
  typeof output === "object" && output !== null && "calls" in output && Array.isArray(output.calls) ? output.calls : []

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("chains", (it) => {
  it.scoped("a three-level chain: A hires B, B hires C; the tree, its cost and the ledger agree; the unspent budget comes back on chain once", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const treasury = yield* TreasuryWorker
      const [a, b, c] = [yield* fakeAgent(), yield* fakeAgent(), yield* fakeAgent("echo")]
      const A = yield* chainAgent(devAccount(1), a.url)
      const B = yield* chainAgent(devAccount(2), b.url)
      const C = yield* chainAgent(devAccount(3), c.url)
      a.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(B, "from A")] })
      b.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(C, "from B")] })
      const payer = devAccount(9)
      const before = yield* usdc(payer.address)

      const root = yield* startChain(payer, A, "1.00")
      expect(root.status, JSON.stringify(root.body)).toBe(200)
      const data = root.body.data
      expect(data.status).toBe("completed")
      expect(data.transactionId).toMatch(/^tx_/)
      expect(data.chain).toMatchObject({ depth: 0, remainingBudget: "0.000000", status: "completed", refunded: "0.967000" })
      const [fromB] = subCalls(data.output)
      expect(fromB?.status).toBe(200)
      const bData = (fromB?.body as { data: { chain: { depth: number; chainId: string }; output: unknown } }).data
      expect(bData.chain).toMatchObject({ depth: 1, chainId: data.chain.chainId })
      const [fromC] = subCalls(bData.output)
      expect(fromC?.status).toBe(200)
      expect((fromC?.body as { data: { chain: { depth: number } } }).data.chain.depth).toBe(2)

      // The root agent was sent a token; the leaf C (chaining on) too, one level deeper.
      expect(a.calls[0]?.headers["x-chain-token"]).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
      expect(a.calls[0]?.headers["traceparent"]).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
      const traceOf = (h: unknown) => String(h).split("-")[1]
      expect(traceOf(c.calls[0]?.headers["traceparent"])).toBe(traceOf(a.calls[0]?.headers["traceparent"]))

      // The tree, by root transaction id and by chain id alike.
      const view = yield* chainOf(data.transactionId)
      expect(view).toMatchObject({
        chainId: data.chain.chainId,
        rootTransactionId: data.transactionId,
        status: "completed",
        totalBudget: "1.000000",
        remainingBudget: "0.000000",
        totalCost: "0.033000",
        maxDepthReached: 2,
        maxDepth: 3,
        nodeCount: 3,
        refund: { amount: "0.967000", status: "pending" }
      })
      expect(view.tree).toMatchObject({ agentId: A, depth: 0, status: "completed", cost: "0.011000", transactionId: data.transactionId })
      expect(view.tree.children).toHaveLength(1)
      expect(view.tree.children[0]).toMatchObject({ agentId: B, depth: 1, status: "completed", cost: "0.011000" })
      expect(view.tree.children[0].children[0]).toMatchObject({ agentId: C, depth: 2, status: "completed", cost: "0.011000", children: [] })
      expect((yield* chainOf(data.chain.chainId)).rootTransactionId).toBe(data.transactionId)

      const cost = (yield* api(`/api/v1/chains/${data.transactionId}/cost`)).body.data
      expect(cost).toMatchObject({
        rootTransactionId: data.transactionId,
        totalCost: "0.033000",
        breakdown: { platformFees: "0.003000", agentFees: "0.030000", platformCuts: "0.004500" },
        byDepth: [{ depth: 0, nodeCount: 1, totalCost: "0.011000" }, { depth: 1, nodeCount: 1, totalCost: "0.011000" }, { depth: 2, nodeCount: 1, totalCost: "0.011000" }],
        refunded: "0.967000"
      })
      expect(cost.byAgent).toEqual(expect.arrayContaining([
        expect.objectContaining({ agentId: B, executionCount: 1, totalCost: "0.011000", earnings: "0.008500" })
      ]))
      expect(yield* ledgerCostOf(data.chain.chainId)).toBe(3n * CALL)
      expect(yield* eventsOf(data.chain.chainId)).toEqual(["chain.started", "chain.child_spawned", "chain.child_spawned", "chain.completed"])

      // Only the root's outcome moves reputation; the hired agents are recorded, not scored.
      expect(yield* reputationOf(A)).toBe(51)
      expect(yield* reputationOf(B)).toBe(50)
      expect(yield* reputationOf(C)).toBe(50)

      yield* treasury.processDue
      expect(yield* usdc(payer.address)).toBe(before - 3n * CALL)
      expect((yield* chainOf(data.transactionId)).refund).toMatchObject({ amount: "0.967000", status: "confirmed", txHash: expect.stringMatching(/^0x/) })
      // Nothing is refunded twice: neither a second pass nor the chain's timer.
      yield* TestClock.adjust(CHAIN_TIMEOUT_MS + 1_000)
      yield* (yield* MachineHost).fireDue
      yield* treasury.processDue
      expect(yield* usdc(payer.address)).toBe(before - 3n * CALL)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("budget-check estimates from the agent's past chains (or the heuristic), with 20% contingency and 50% on top; bad input is 400", () =>
    Effect.gen(function* () {
      const [A, B] = [agentIds.get(devAccount(1).address) ?? "", agentIds.get(devAccount(2).address) ?? ""]
      const learned = yield* api("/api/v1/chains/budget-check", { json: { targetAgentId: A, capabilityId: "echo", input: { text: "x" }, estimatedDepth: 2 } })
      expect(learned.status).toBe(200)
      // A's one finished chain spent 0.011 at depth 1 and 0.011 at depth 2: 0.011 + 0.022 = 0.033, +20% = 0.0396, +50% = 0.0594.
      expect(learned.body.data).toEqual({
        estimatedTotal: "0.039600",
        breakdown: { directCost: "0.010000", platformFees: "0.001000", estimatedSubAgentCosts: "0.022000", contingency: "0.006600" },
        capability: { id: "echo", name: "Echo", basePrice: "0.010000" },
        warnings: [],
        recommendedBudget: "0.059400",
        estimateSource: "history"
      })
      const guessed = yield* api("/api/v1/chains/budget-check", { json: { targetAgentId: B, capabilityId: "echo", input: { text: "x" } } })
      expect(guessed.body.data).toMatchObject({ estimatedTotal: "0.026400", recommendedBudget: "0.039600", estimateSource: "heuristic" })
      expect(guessed.body.data.warnings).toHaveLength(1)
      const direct = yield* api("/api/v1/chains/budget-check", { json: { targetAgentId: B, capabilityId: "echo", input: { text: "x" }, includeSubAgentCosts: false } })
      expect(direct.body.data).toMatchObject({ estimatedTotal: "0.013200", breakdown: { estimatedSubAgentCosts: "0.000000" } })

      const bad = yield* api("/api/v1/chains/budget-check", { json: { targetAgentId: A, capabilityId: "echo", input: {} } })
      expect(bad.status).toBe(400)
      expect(bad.body.error?.code).toBe("VALIDATION_ERROR")
      const deep = yield* api("/api/v1/chains/budget-check", { json: { targetAgentId: A, capabilityId: "echo", input: { text: "x" }, estimatedDepth: 9 } })
      expect(deep.status).toBe(400)
      const missing = yield* api("/api/v1/chains/budget-check", { json: { targetAgentId: "6f1c2a9e-0000-4000-8000-000000000000", capabilityId: "echo", input: {} } })
      expect(missing.body.error?.code).toBe("AGENT_NOT_FOUND")
      expect((yield* api("/api/v1/chains/6f1c2a9e-0000-4000-8000-000000000000")).body.error?.code).toBe("CHAIN_NOT_FOUND")
    }))

})
