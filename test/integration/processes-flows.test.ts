// Issue 25, with WEB_CONCURRENCY=2 (the start script: a primary and two workers on one port): a three-level chain whose
// root call and sub-calls reach both workers, and webhooks fed by paid calls through both, assert what the one-process
// tests assert (tree, cost, refund once on chain, each event once, each attempt once); reputation after the chain
// reads the same through both workers within 1 s. The official MCP SDK client, each request on a new connection, is
// served by both workers.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { afterAll, beforeAll } from "vitest"
import { type ChainedResult, fakeAgent } from "../support/agents.js"
import { balancer } from "../support/balancer.js"
import { devAccount, usdcBalance, walletAuth } from "../support/clients.js"
import { mcpClient } from "../support/mcp.js"
import { type Received, receiver } from "../support/receivers.js"
import { ensureBundle } from "../support/servers.js"
import { type Cluster, registerThrough, seenByEach, startCluster, until } from "../support/twoProcesses.js"

const CALL = 11_000n // 0.01 basePrice + 0.001 platform fee

let cluster: Cluster

beforeAll(async () => {
  await ensureBundle()
  cluster = await startCluster()
}, 180_000)

afterAll(async () => {
  await cluster?.stop()
}, 60_000)

const promise = <A>(f: () => Promise<A>) => Effect.promise(f)

const subscribe = (owner: PrivateKeyAccount, agentId: string, url: string, events: ReadonlyArray<string>) =>
  promise(async () => {
    const created = await cluster.call("/api/v1/webhooks", { json: { agentId, url, events }, headers: await walletAuth(owner, agentId) })
    expect(created.status, JSON.stringify(created.body)).toBe(201)
    return String(created.body.data.id)
  })

/** Chaining on (depth 3, no caller lists). */
const enableChaining = (owner: PrivateKeyAccount, agentId: string) =>
  promise(async () => {
    const patched = await cluster.call(`/api/v1/agents/${agentId}`, {
      method: "PATCH",
      headers: await walletAuth(owner, agentId),
      json: { chainSettings: { chain_enabled: true, chain_max_depth: 3, chain_allowed_callers: [], chain_blocked_callers: [] } }
    })
    expect(patched.status).toBe(200)
  })

/** A sub-call on its own connection, so that sub-calls spread over both workers. */
const echo = (targetAgentId: string, text: string) => ({ body: { targetAgentId, capabilityId: "echo", input: { text } }, headers: { connection: "close" } })

const attemptKey = (r: Received) => `${String(r.headers["x-webhook-delivery-id"])}#${String(r.headers["x-webhook-attempt"])}`

const subCalls = (output: unknown): Array<ChainedResult> =>
  typeof output === "object" && output !== null && "calls" in output && Array.isArray(output.calls) ? output.calls : []

describe("WEB_CONCURRENCY=2: chains and webhooks through both workers (issue 25)", () => {
  it.scopedLive("a three-level chain: the tree, its cost and the ledger agree, each chain event reaches the webhook once, the unspent budget comes back on chain once", () =>
    Effect.gen(function* () {
      const [a, b, c] = [yield* fakeAgent(), yield* fakeAgent(), yield* fakeAgent("echo")]
      const owners = [devAccount(1), devAccount(2), devAccount(3)] as const
      const [A, B, C] = yield* Effect.forEach([a, b, c], (agent, i) => promise(() => registerThrough(cluster, owners[i]!, agent.url)))
      for (const [i, id] of [A, B, C].entries()) yield* enableChaining(owners[i]!, id!)
      a.setBehaviour({ kind: "call-back", baseUrl: cluster.server.baseUrl, calls: [echo(B!, "from A")] })
      b.setBehaviour({ kind: "call-back", baseUrl: cluster.server.baseUrl, calls: [echo(C!, "from B")] })
      const hook = yield* receiver([200])
      yield* subscribe(owners[0], A!, hook.url, ["chain.*"])
      const payer = devAccount(9)
      const before = yield* promise(() => usdcBalance(payer.address))

      const root = yield* promise(() => cluster.paid(payer, "/api/v1/execute", { json: { targetAgentId: A, capabilityId: "echo", input: { text: "hi" } }, headers: { "X-Chain-Budget": "1.00" } }))
      expect(root.status, JSON.stringify(root.body)).toBe(200)
      const data = root.body.data
      expect(data.chain).toMatchObject({ depth: 0, remainingBudget: "0.000000", status: "completed", refunded: "0.967000" })
      const [fromB] = subCalls(data.output)
      expect(fromB?.status).toBe(200)
      const bData = (fromB?.body as { data: { chain: { depth: number; chainId: string }; output: unknown } }).data
      expect(bData.chain).toMatchObject({ depth: 1, chainId: data.chain.chainId })
      expect(subCalls(bData.output)[0]?.status).toBe(200)

      // The tree and its cost, the same through both workers.
      const view = yield* promise(() => seenByEach(cluster, `/api/v1/chains/${data.transactionId}`, (r) => r.body.data?.nodeCount === 3))
      for (const answer of view.last.values()) {
        expect(answer.body.data).toMatchObject({ chainId: data.chain.chainId, status: "completed", totalBudget: "1.000000", totalCost: "0.033000", maxDepthReached: 2 })
        expect(answer.body.data.tree).toMatchObject({ agentId: A, depth: 0, cost: "0.011000" })
        expect(answer.body.data.tree.children[0]).toMatchObject({ agentId: B, depth: 1 })
        expect(answer.body.data.tree.children[0].children[0]).toMatchObject({ agentId: C, depth: 2, children: [] })
      }
      const cost = yield* promise(() => cluster.call(`/api/v1/chains/${data.transactionId}/cost`))
      expect(cost.body.data).toMatchObject({ totalCost: "0.033000", breakdown: { platformFees: "0.003000", agentFees: "0.030000", platformCuts: "0.004500" }, refunded: "0.967000" })

      // Only the root's outcome moves reputation, read the same through both workers once folded.
      for (const [id, score] of [[A, 51], [B, 50], [C, 50]] as const) {
        yield* promise(() => seenByEach(cluster, `/api/v1/agents/${id}`, (r) => r.body.data?.reputation_score === score))
      }
      // Each chain event reaches the root agent's webhook once; the refund is sent on chain once.
      yield* promise(() => until(async () => hook.received.length, (n) => n >= 4, 30_000, "the chain's webhooks"))
      const events = hook.received.map((r) => JSON.parse(r.body) as { event: string; data: { chainId?: string } })
      expect(events.map((e) => e.event).sort()).toEqual(["chain.child_spawned", "chain.child_spawned", "chain.completed", "chain.started"])
      expect(events.every((e) => e.data.chainId === data.chain.chainId)).toBe(true)
      yield* promise(() => until(() => usdcBalance(payer.address), (x) => x === before - 3n * CALL, 30_000, "the unspent budget back on chain"))
      const refund = yield* promise(() => seenByEach(cluster, `/api/v1/chains/${data.transactionId}`, (r) => r.body.data?.refund?.status === "confirmed", 10_000))
      for (const answer of refund.last.values()) expect(answer.body.data.refund).toMatchObject({ amount: "0.967000", txHash: expect.stringMatching(/^0x/) })
      const refunds = yield* promise(() => cluster.query<{ n: number }>("SELECT count(*)::int AS n FROM refunds WHERE chain_id = $1", [data.chain.chainId]))
      expect(refunds[0]?.n).toBe(1)
      expect(yield* promise(() => usdcBalance(payer.address))).toBe(before - 3n * CALL)
    }), { timeout: 120_000 })

  it.scopedLive("paid calls through both workers: each event reaches the webhook once and each attempt is posted once, retries included", () =>
    Effect.gen(function* () {
      const owner = devAccount(4)
      const agent = yield* fakeAgent()
      const agentId = yield* promise(() => registerThrough(cluster, owner, agent.url, { premium: true }))
      // Every other delivery fails its first attempt and succeeds on its second (after ~1 s): retries are shared out too.
      let firsts = 0
      const failedFirst = new Set<string>()
      const hook = yield* receiver((r) => {
        if (r.headers["x-webhook-attempt"] !== "1" || firsts++ % 2 === 1) return 200
        failedFirst.add(String(r.headers["x-webhook-delivery-id"]))
        return 500
      })
      const subscriptionId = yield* subscribe(owner, agentId, hook.url, ["*"])
      // Six paid calls, each on its own connection (both workers serve them): payment.received, execution.completed and
      // escrow.released each.
      const served = new Set<number>()
      for (let i = 0; i < 6; i++) {
        const requestId = `hooked-${i}-${Date.now()}`
        const paid = yield* promise(() =>
          cluster.paid(devAccount(5 + (i % 3)), "/api/v1/execute", { json: { targetAgentId: agentId, capabilityId: "echo", input: { text: `call ${i}` } }, headers: { "x-request-id": requestId } }))
        expect(paid.status).toBe(200)
        served.add(yield* promise(() => cluster.servedBy(requestId)))
      }
      expect(served).toEqual(new Set(cluster.workers))
      const counts = () =>
        cluster.query<{ total: number; delivered: number }>(
          "SELECT count(*)::int AS total, count(*) FILTER (WHERE status = 'delivered')::int AS delivered FROM webhook_deliveries WHERE subscription_id = $1",
          [subscriptionId]
        ).then((rows) => rows[0] ?? { total: 0, delivered: 0 })
      const done = yield* promise(() => until(counts, (c) => c.total >= 18 && c.delivered === c.total, 60_000, "every delivery delivered"))
      expect(new Set(hook.received.map((r) => String(r.headers["x-webhook-delivery-id"]))).size).toBe(done.total)

      const perAttempt = new Map<string, number>()
      for (const r of hook.received) perAttempt.set(attemptKey(r), (perAttempt.get(attemptKey(r)) ?? 0) + 1)
      expect([...perAttempt.values()].filter((n) => n !== 1)).toEqual([])
      expect(failedFirst.size).toBeGreaterThanOrEqual(Math.floor(done.total / 2))
      expect(hook.received).toHaveLength(done.total + failedFirst.size)
      // Each event once: one delivery per (event, subject).
      const subjects = new Set(hook.received.map((r) => {
        const body = JSON.parse(r.body) as { event: string; data: Record<string, unknown> }
        return `${body.event}:${String(body.data["requestId"] ?? body.data["transactionId"] ?? body.data["paymentId"])}`
      }))
      expect(subjects.size).toBe(done.total)
      const logged = yield* promise(() => cluster.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.subscription_id = $1", [subscriptionId]))
      expect(logged[0]?.n).toBe(done.total + failedFirst.size)
      const [subscription] = yield* promise(() => cluster.query<{ isActive: boolean; failureCount: number }>(
        "SELECT is_active AS \"isActive\", failure_count AS \"failureCount\" FROM webhook_subscriptions WHERE id = $1", [subscriptionId]))
      expect(subscription).toEqual({ isActive: true, failureCount: 0 })
    }), { timeout: 120_000 })

  it.scopedLive("MCP with the official SDK client, each request on a new connection: both workers serve it, no session lost", () =>
    Effect.gen(function* () {
      // A balancer with one upstream opens a new connection per request; the primary hands connections out in turn.
      const front = yield* balancer
      front.setUpstreams([cluster.server.baseUrl])
      const { client } = yield* mcpClient("two-workers", `${front.url}/mcp`)
      for (let i = 0; i < 4; i++) {
        const tags = yield* promise(() => client.callTool({ name: "list_tags", arguments: {} }))
        expect(tags.isError ?? false, JSON.stringify(tags)).toBe(false)
      }
      const pids = yield* promise(() =>
        until(async () => new Set(cluster.server.output().split("\n").flatMap((line) => {
          if (!line.startsWith("{")) return []
          const record = JSON.parse(line) as { route?: string; pid?: number }
          return record.route === "/mcp" && record.pid !== undefined ? [record.pid] : []
        })), (seen) => seen.size === 2, 5_000, "MCP requests logged by both workers"))
      expect(pids).toEqual(new Set(cluster.workers))
    }), { timeout: 60_000 })
})
