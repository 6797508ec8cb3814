// Chains end to end: a client pays a budget (x402-fetch, X-Chain-Budget); fake agents on loopback hire each other through
// the service with the X-Chain-Token they were sent; the tree, its cost and the ledger agree; the unspent budget comes
// back on chain once; every refusal happens before anything is reserved; concurrent sub-calls never overspend.
import { expect, layer } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { CHAIN_TIMEOUT_MS } from "../../machines/chain.js"
import { MachineHost } from "../../machines/Host.js"
import { Payments } from "../../services/payments/Payments.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { type ChainedResult, fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, usdcBalance, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, ledgerMatchesChain, registerAgent } from "../support/scenario.js"
import { foldOutcomes } from "../support/reputation.js"

/** A webhook receiver on loopback that keeps the events it is sent (closed with the test's scope). */
const chainEventReceiver = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly events: Array<{ event: string; data: { chainId?: string } }>; readonly server: http.Server }>((resume) => {
    const events: Array<{ event: string; data: { chainId?: string } }> = []
    const server = http.createServer((req, res) => {
      let body = ""
      req.on("data", (c: Buffer) => (body += c.toString("utf8")))
      req.on("end", () => {
        events.push(JSON.parse(body))
        res.writeHead(204).end()
      })
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, events, server })))
  }),
  ({ server }) => Effect.sync(() => server.close())
)

const CALL = 11_000n // 0.001 platform fee + 0.01 basePrice per call

/**
 * Each test starts at the real time (payments and signatures are signed against it; only the test moves the clock after),
 * with the refunds earlier tests queued already sent (payers' balances are compared before and after).
 */
const realNow = Effect.gen(function* () {
  yield* TestClock.setTime(Date.now())
  yield* (yield* TreasuryWorker).processDue
})

const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, {
        method: init.method ?? (init.json === undefined ? "GET" : "POST"),
        ...(init.json === undefined ? {} : { json: init.json }),
        headers: init.headers ?? {}
      })))

/** One agent per wallet (per server): registered the first time, pointed at a new fake agent (settings reset) afterwards. */
const agentIds = new Map<string, string>()

/** An agent in the chain business at `url`: chaining on, depth 3, no caller lists, unless `settings` say otherwise. */
const chainAgent = (owner: PrivateKeyAccount, url: string, settings: Record<string, unknown> = {}, capabilities?: Array<unknown>) =>
  Effect.gen(function* () {
    const { baseUrl } = yield* TestEnv
    const key = `${baseUrl} ${owner.address}`
    const id = agentIds.get(key) ?? (yield* registerAgent(owner, url, capabilities === undefined ? {} : { capabilities }))
    agentIds.set(key, id)
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

const reputationOf = (agentId: string) =>
  Effect.zipRight(foldOutcomes, Effect.map(api(`/api/v1/agents/${agentId}`), (r) => r.body.data.reputation_score as number))

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

// The clock moves 5 minutes while a chain's root call waits for its agent: its deadline outlasts that.
layer(TestApp({ BACKGROUND_WORKERS: "false", PAID_CALL_DEADLINE_MS: "600000" }))("chains", (it) => {
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
      // The root agent's owner listens to its chain events.
      const hook = yield* chainEventReceiver
      const subscribed = yield* api("/api/v1/webhooks", { json: { agentId: A, url: hook.url, events: ["chain.*"] }, headers: yield* Effect.promise(() => walletAuth(devAccount(1), A)) })
      expect(subscribed.status).toBe(201)
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
      // The same events reach the root agent's webhook (subscribed to chain.*), each once.
      const dispatcher = yield* Dispatcher
      yield* dispatcher.dispatchDue
      yield* dispatcher.sendDue
      expect(hook.events.map((e) => e.event).sort()).toEqual(["chain.child_spawned", "chain.child_spawned", "chain.completed", "chain.started"])
      expect(hook.events.every((e) => e.data.chainId === data.chain.chainId)).toBe(true)

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
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const [A, B] = [agentIds.get(`${baseUrl} ${devAccount(1).address}`) ?? "", agentIds.get(`${baseUrl} ${devAccount(2).address}`) ?? ""]
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


  it.scoped("X-Chain-Budget is checked before payment: bad amounts 400, a disabled root 403, a budget short of the root call 402; empty or default is 10.00", () =>
    Effect.gen(function* () {
      yield* realNow
      const plain = yield* fakeAgent()
      const A = yield* chainAgent(devAccount(1), plain.url)
      const off = yield* chainAgent(devAccount(4), plain.url, { chain_enabled: false })
      const execute = (agentId: string, headers: Record<string, string>) =>
        api("/api/v1/execute", { json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "hi" } }, headers })
      for (const bad of ["0.001", "1000.01", "abc", "-1", "5.0000001"]) {
        const refused = yield* execute(A, { "X-Chain-Budget": bad })
        expect(refused.status, bad).toBe(400)
        expect(refused.body.error?.details?.issues?.[0]?.path, bad).toBe("X-Chain-Budget")
      }
      for (const fallback of ["default", ""]) {
        const challenge = yield* execute(A, { "X-Chain-Budget": fallback })
        expect(challenge.status).toBe(402)
        expect(challenge.body.error?.details?.price).toBe("10.000000")
      }
      expect((yield* execute(A, { "X-Chain-Budget": "2.50" })).body.error?.details?.price).toBe("2.500000")
      const disabled = yield* execute(off, { "X-Chain-Budget": "1.00" })
      expect(disabled.status).toBe(403)
      expect(disabled.body.error?.code).toBe("CHAIN_DISABLED")
      const short = yield* execute(A, { "X-Chain-Budget": "0.01" })
      expect(short.status).toBe(402)
      expect(short.body.error).toMatchObject({ code: "BUDGET_EXCEEDED", details: { estimated: "0.011000", remaining: "0.010000", shortfall: "0.001000" } })
      const both = yield* execute(A, { "X-Chain-Budget": "1.00", "X-Chain-Token": "x.y" })
      expect(both.status).toBe(400)
      expect(plain.calls).toHaveLength(0)
    }))

  it.scoped("every refusal of a sub-call has its code, status and details, and reserves nothing", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl, sql } = yield* TestEnv
      const [a, b] = [yield* fakeAgent(), yield* fakeAgent("echo")]
      const B = yield* chainAgent(devAccount(2), b.url)
      const A = yield* chainAgent(devAccount(1), a.url)
      const off = yield* chainAgent(devAccount(8), b.url, { chain_enabled: false })
      const blocking = yield* chainAgent(devAccount(5), b.url, { chain_blocked_callers: [A] })
      const choosy = yield* chainAgent(devAccount(6), b.url, { chain_allowed_callers: [B] })
      const pricey = yield* chainAgent(devAccount(7), b.url, {}, [echoCapability({ pricing: { model: "per-request", basePrice: "5.00", currency: "USDC" } })])
      const shunned = yield* chainAgent(devAccount(4), b.url)
      yield* sql`UPDATE agents SET reputation_score = 30 WHERE id = ${shunned}`
      yield* chainAgent(devAccount(4), b.url) // an update drops the cached copy
      a.setBehaviour({
        kind: "call-back",
        baseUrl,
        calls: [
          { ...echo(B, "tampered"), token: tamper },
          { ...echo(B, "garbage"), token: () => "not-a-token" },
          { ...echo(B, "forged"), token: (t) => `${t.split(".")[0]}.${"A".repeat(43)}` },
          echo(A, "myself"),
          echo(off, "disabled"),
          echo(blocking, "blocked"),
          echo(choosy, "not allowed"),
          echo(shunned, "low reputation"),
          echo(pricey, "too dear"),
          { body: { targetAgentId: B, capabilityId: "echo", input: { wrong: true } } },
          { body: { targetAgentId: B, capabilityId: "nope", input: { text: "x" } } }
        ]
      })
      const payer = devAccount(9)
      const root = yield* startChain(payer, A, "1.00")
      expect(root.status, JSON.stringify(root.body)).toBe(200)
      const answers = subCalls(root.body.data.output).map((r) => ({ status: r.status, error: (r.body as { error: { code: string; details?: unknown } }).error }))
      expect(answers.map((r) => [r.status, r.error.code])).toEqual([
        [401, "CHAIN_TOKEN_INVALID"],
        [401, "CHAIN_TOKEN_INVALID"],
        [401, "CHAIN_TOKEN_INVALID"],
        [400, "CIRCULAR_DEPENDENCY"],
        [403, "CHAIN_DISABLED"],
        [403, "CHAIN_DISABLED"],
        [403, "CHAIN_DISABLED"],
        [403, "AGENT_NOT_CHAINABLE"],
        [402, "BUDGET_EXCEEDED"],
        [400, "VALIDATION_ERROR"],
        [404, "CAPABILITY_NOT_FOUND"]
      ])
      expect(answers[3]?.error.details).toEqual({ chain: [A, A] })
      expect(answers[4]?.error.details).toMatchObject({ reason: "chaining_disabled", agentId: off })
      expect(answers[5]?.error.details).toMatchObject({ reason: "caller_blocked", callerAgentId: A })
      expect(answers[6]?.error.details).toMatchObject({ reason: "caller_not_allowed" })
      expect(answers[7]?.error.details).toMatchObject({ reputation: 30, minimum: 40 })
      expect(answers[8]?.error.details).toEqual({ estimated: "5.001000", remaining: "0.989000", shortfall: "4.012000" })
      expect(b.calls).toHaveLength(0)
      // Nothing was reserved: one node, the whole rest of the budget refunded.
      const view = yield* chainOf(root.body.data.transactionId)
      expect(view).toMatchObject({ status: "completed", nodeCount: 1, totalCost: "0.011000", refund: { amount: "0.989000" } })
      expect(yield* eventsOf(view.chainId)).toEqual(["chain.started", "chain.completed"])
    }))

  it.scoped("a failed sub-call gives its reservation back to the chain (no retry), the chain ends partial and the rest is refunded", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const treasury = yield* TreasuryWorker
      const [a, b] = [yield* fakeAgent(), yield* fakeAgent({ kind: "json", status: 500, body: { error: "boom" } })]
      const A = yield* chainAgent(devAccount(1), a.url)
      const B = yield* chainAgent(devAccount(2), b.url)
      a.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(B, "fails")] })
      const payer = devAccount(9)
      const before = yield* usdc(payer.address)
      const reputation = yield* reputationOf(B)
      const root = yield* startChain(payer, A, "0.50")
      expect(root.status).toBe(200)
      const [failed] = subCalls(root.body.data.output)
      expect(failed?.status).toBe(502)
      const error = (failed?.body as { error: { code: string; details: { status: string; chain: { depth: number } } } }).error
      expect(error.code).toBe("EXECUTION_FAILED")
      expect(error.details).toMatchObject({ status: "failed", chain: { depth: 1, remainingBudget: "0.489000" } })
      const view = yield* chainOf(root.body.data.transactionId)
      expect(view).toMatchObject({ status: "partial", nodeCount: 2, totalCost: "0.011000", refund: { amount: "0.489000" } })
      expect(view.tree.children[0]).toMatchObject({ agentId: B, status: "failed", cost: "0.000000" })
      const retried = yield* api(`/api/v1/execute/${view.tree.children[0].requestId}/retry`, { method: "POST" })
      expect(retried.status).toBe(403)
      expect(yield* eventsOf(view.chainId)).toEqual(["chain.started", "chain.child_spawned", "chain.partial_failure", "chain.completed"])
      expect(yield* reputationOf(B)).toBe(reputation)
      // The failure is recorded for health all the same.
      expect((yield* api(`/api/v1/agents/${B}`)).body.data.health_score).toBeLessThan(1)
      expect(yield* ledgerCostOf(view.chainId)).toBe(CALL)
      yield* treasury.processDue
      expect(yield* usdc(payer.address)).toBe(before - CALL)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))

  it.scoped("depth beyond the root agent's chain_max_depth is DEPTH_LIMIT; a cycle A → B → A is CIRCULAR_DEPENDENCY naming the path", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl } = yield* TestEnv
      const [a, b, c] = [yield* fakeAgent(), yield* fakeAgent(), yield* fakeAgent("echo")]
      const A = yield* chainAgent(devAccount(1), a.url, { chain_max_depth: 1 })
      const B = yield* chainAgent(devAccount(2), b.url)
      const C = yield* chainAgent(devAccount(3), c.url)
      a.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(B, "one level")] })
      b.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(C, "two levels"), echo(A, "back to A")] })
      const root = yield* startChain(devAccount(9), A, "1.00")
      expect(root.status).toBe(200)
      const [fromB] = subCalls(root.body.data.output)
      expect(fromB?.status).toBe(200)
      const [deeper, cycle] = subCalls((fromB?.body as { data: { output: unknown } }).data.output)
      expect(deeper).toMatchObject({ status: 400, body: { error: { code: "DEPTH_LIMIT", details: { currentDepth: 2, maxDepth: 1 } } } })
      // The depth is checked first: with room to go deeper, the same call back to A is a cycle.
      expect(cycle?.status).toBe(400)
      const view = yield* chainOf(root.body.data.transactionId)
      expect(view).toMatchObject({ maxDepth: 1, maxDepthReached: 1, nodeCount: 2 })
      expect(yield* eventsOf(view.chainId)).toContain("chain.depth_limit")

      yield* chainAgent(devAccount(1), a.url, { chain_max_depth: 3 })
      b.setBehaviour({ kind: "call-back", baseUrl, calls: [echo(A, "back to A")] })
      const again = yield* startChain(devAccount(9), A, "1.00")
      const [viaB] = subCalls(again.body.data.output)
      const [backToA] = subCalls((viaB?.body as { data: { output: unknown } }).data.output)
      expect(backToA).toMatchObject({ status: 400, body: { error: { code: "CIRCULAR_DEPENDENCY", details: { chain: [A, B, A] } } } })
      expect(c.calls).toHaveLength(0)
    }))

  it.scoped("a token is refused 30 s after it was issued (CHAIN_TOKEN_EXPIRED) and a chain older than 5 minutes takes no sub-call (CHAIN_TIMEOUT)", () =>
    Effect.gen(function* () {
      yield* realNow
      const [a, b] = [yield* fakeAgent({ kind: "delay", ms: 8_000, then: "echo" }), yield* fakeAgent("echo")]
      const A = yield* chainAgent(devAccount(1), a.url)
      const B = yield* chainAgent(devAccount(2), b.url)
      const root = yield* Effect.fork(startChain(devAccount(9), A, "1.00"))
      const received = yield* Effect.promise(() => a.waitForCall(0, 20_000))
      const token = String(received.headers["x-chain-token"])
      const body = { targetAgentId: B, capabilityId: "echo", input: { text: "hi" } }

      // The test acts as A: a sub-call with a fresh token is fine and brings a fresh token for the next one.
      const first = yield* chained(token, body)
      expect(first.status, JSON.stringify(first.body)).toBe(200)
      expect(first.body.data.chain).toMatchObject({ depth: 1, remainingBudget: "0.978000" })
      yield* TestClock.adjust(29_000)
      const second = yield* chained(first.body.data.chain.childToken, body)
      expect(second.status, JSON.stringify(second.body)).toBe(200)
      yield* TestClock.adjust(1_000)
      const replayed = yield* chained(token, body)
      expect(replayed.status).toBe(401)
      expect(replayed.body.error?.code).toBe("CHAIN_TOKEN_EXPIRED")
      const tampered = yield* chained(tamper(second.body.data.chain.childToken), body)
      expect(tampered.body.error?.code).toBe("CHAIN_TOKEN_INVALID")

      // Refreshing the token every 29 s keeps calling until the chain is 5 minutes old; then CHAIN_TIMEOUT.
      let latest: string = second.body.data.chain.childToken
      let elapsed = 30_000
      while (elapsed + 29_000 < CHAIN_TIMEOUT_MS) {
        yield* TestClock.adjust(28_000)
        elapsed += 28_000
        const next = yield* chained(latest, body)
        expect(next.status, JSON.stringify(next.body)).toBe(200)
        latest = next.body.data.chain.childToken
      }
      yield* TestClock.adjust(CHAIN_TIMEOUT_MS - elapsed)
      const late = yield* chained(latest, body)
      expect(late.status).toBe(408)
      expect(late.body.error?.code).toBe("CHAIN_TIMEOUT")
      const answered = yield* Fiber.join(root)
      expect(answered.status).toBe(200)
      // The root answered and nothing was in flight: the chain ended; a still-fresh token finds no chain to spend.
      const over = yield* chained(latest, body)
      expect(over.status).toBe(404)
      expect(over.body.error).toMatchObject({ code: "CHAIN_NOT_FOUND", details: { status: "completed" } })
    }))

  it.scoped("20 concurrent sub-calls against a budget that covers 10: exactly 10 run, 10 are BUDGET_EXCEEDED, the budget never goes below zero", () =>
    Effect.gen(function* () {
      yield* realNow
      const { baseUrl, sql } = yield* TestEnv
      const treasury = yield* TreasuryWorker
      const [a, b] = [yield* fakeAgent(), yield* fakeAgent({ kind: "delay", ms: 50, then: "echo" })]
      const A = yield* chainAgent(devAccount(1), a.url)
      const B = yield* chainAgent(devAccount(2), b.url)
      a.setBehaviour({ kind: "call-back", baseUrl, concurrent: true, calls: Array.from({ length: 20 }, (_, i) => echo(B, `call ${i}`)) })
      const payer = devAccount(9)
      const before = yield* usdc(payer.address)
      const root = yield* startChain(payer, A, "0.121") // the root call and 10 sub-calls at 0.011 each
      expect(root.status).toBe(200)
      const results = subCalls(root.body.data.output)
      expect(results).toHaveLength(20)
      expect(results.filter((r) => r.status === 200)).toHaveLength(10)
      const refused = results.filter((r) => r.status !== 200)
      expect(refused.map((r) => r.status)).toEqual(Array(10).fill(402))
      expect(refused.every((r) => (r.body as { error: { code: string } }).error.code === "BUDGET_EXCEEDED")).toBe(true)
      expect(b.calls).toHaveLength(10)
      const view = yield* chainOf(root.body.data.transactionId)
      expect(view).toMatchObject({ status: "completed", nodeCount: 11, totalCost: "0.121000", remainingBudget: "0.000000", refund: null })
      const [budgets] = yield* sql<{ balance: string }>`SELECT COALESCE(SUM(amount), 0)::text AS balance FROM ledger_entries WHERE account_id = 'chain_budgets'`
      expect(budgets?.balance).toBe("0")
      yield* treasury.processDue
      expect(yield* usdc(payer.address)).toBe(before - 11n * CALL)
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})

/** The chain budget whose first settlement "crashes" the process (other payments settle normally). */
const CRASHING_BUDGET = 777_000n
let crashed = false

layer(
  TestApp(
    { BACKGROUND_WORKERS: "false", EXECUTION_TIMEOUT_MS: "5000", EXECUTION_RETRY_WINDOW_SECONDS: "600" },
    {
      faults: {
        beforeSettle: (p) =>
          crashed || p.amount !== CRASHING_BUDGET ? Effect.void : Effect.sync(() => void (crashed = true)).pipe(Effect.zipRight(Effect.die("simulated crash")))
      }
    }
  )
)("chains after a crash", (it) => {
  it.scoped("a chain whose root process died before its payment settled is finished by the workers and timers: the budget comes back once", () =>
    Effect.gen(function* () {
      yield* realNow
      const a = yield* fakeAgent("echo")
      const A = yield* chainAgent(devAccount(1), a.url)
      const payer = devAccount(8)
      const before = yield* usdc(payer.address)
      const root = yield* startChain(payer, A, "0.777")
      // The process "died" before settling: nothing answered, the agent was never called.
      expect(root.status).toBe(200)
      expect(root.body.data).toMatchObject({ status: "pending", chain: { status: "pending", remainingBudget: "0.766000" } })
      expect(a.calls).toHaveLength(0)
      const chainId: string = root.body.data.chain.chainId

      // The settlement recovery takes the payment over after its lease; the root's deadline timer declares it dead.
      yield* TestClock.adjust(61_000)
      yield* (yield* Payments).recoverDue
      yield* TestClock.adjust(10_000)
      const machines = yield* MachineHost
      yield* machines.fireDue
      expect((yield* chainOf(chainId)).status).toBe("pending")
      // The chain's durable timer ends it: the root never ran, so the budget minus the root's price is refunded now...
      yield* TestClock.adjust(CHAIN_TIMEOUT_MS)
      yield* machines.fireDue
      const ended = yield* chainOf(chainId)
      expect(ended).toMatchObject({ status: "failed", remainingBudget: "0.000000", refund: { amount: "0.766000" } })
      expect(ended.tree.status).toBe("timeout")
      const treasury = yield* TreasuryWorker
      yield* treasury.processDue
      expect(yield* usdc(payer.address)).toBe(before - CALL)
      // ...and the root's own price once its retry window closes; the timers firing again change nothing.
      yield* TestClock.adjust(600_000)
      yield* machines.fireDue
      yield* treasury.processDue
      yield* machines.fireDue
      yield* treasury.processDue
      expect(yield* usdc(payer.address)).toBe(before)
      expect(yield* eventsOf(chainId)).toEqual(["chain.started", "chain.completed"])
      expect(yield* ledgerMatchesChain).toBe(0n)
    }))
})
