// Issue 25, with WEB_CONCURRENCY=2 (the start script: a primary and two workers on one port): every request on its own
// connection, so both workers serve; paid calls, failures, disputes and withdrawals assert what the one-process tests
// assert, and every read a change affects (the agent's reputation, health and counters, balances, a dispute, a
// withdrawal) shows the change through each worker within 1 s of the answer that made it (or of the fold that applies
// it), each worker's agent cache warmed with the old value first.
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { PrivateKeyAccount } from "viem/accounts"
import { privateKeyToAccount } from "viem/accounts"
import { randomBytes } from "node:crypto"
import { type FakeAgent, startFakeAgent } from "../support/agents.js"
import { devAccount, TREASURY, usdcBalance, walletAuth } from "../support/clients.js"
import { signPayout } from "../support/payouts.js"
import { ensureBundle } from "../support/servers.js"
import { type Cluster, OPERATOR, readOnEach, registerThrough, seenByEach, startCluster, until } from "../support/twoProcesses.js"

const PRICE = 11_000n // 0.01 basePrice + 0.001 platform fee
const operator = OPERATOR

let cluster: Cluster
const agents: Array<FakeAgent> = []

beforeAll(async () => {
  await ensureBundle()
  cluster = await startCluster()
}, 180_000)

afterAll(async () => {
  await cluster?.stop()
  await Promise.all(agents.map((a) => a.close()))
}, 60_000)

const fake = async (behaviour: Parameters<typeof startFakeAgent>[0] = "echo") => {
  const agent = await startFakeAgent(behaviour)
  agents.push(agent)
  return agent
}

const register = (owner: PrivateKeyAccount, url: string, options: { premium?: boolean; basePrice?: string } = {}) =>
  registerThrough(cluster, owner, url, options)

const execute = (payer: PrivateKeyAccount, agentId: string, text = "hello") =>
  cluster.paid(payer, "/api/v1/execute", { json: { targetAgentId: agentId, capabilityId: "echo", input: { text } } })

const reputationIs = (score: number) => (a: { body: { data?: { reputation_score?: number } } }) => a.body.data?.reputation_score === score

describe("WEB_CONCURRENCY=2: every process sees the same truth (issue 25)", () => {
  it("a paid call settles once and splits the money; its balance, and once folded its reputation +1, read the same through both workers within 1 s", async () => {
    const agentId = await register(devAccount(1), (await fake()).url, { premium: true })
    const agentPath = `/api/v1/agents/${agentId}`
    await readOnEach(cluster, agentPath) // both workers cache the agent at reputation 50
    const payer = devAccount(2)
    const payerBefore = await usdcBalance(payer.address)

    const response = await execute(payer, agentId)
    expect(response.status).toBe(200)
    expect(response.body.data).toMatchObject({
      status: "completed",
      output: { echo: { text: "hello" } },
      cost: { agentFee: "0.010000", platformFee: "0.001000", total: "0.011000" },
      settlement: { status: "settled" }
    })
    expect(response.headers.get("x-payment-used")).toBeTruthy()
    expect(await usdcBalance(payer.address)).toBe(payerBefore - PRICE)
    await seenByEach(cluster, `/api/v1/payments/balance/${agentId}`, (a) =>
      a.body.data?.available === "0.008500" && a.body.data?.totalEarned === "0.008500" && a.body.data?.executionCount === 1)
    const scored = await seenByEach(cluster, agentPath, (a) => reputationIs(51)(a) && a.body.data?.health_score === 1)
    expect(scored.last.size).toBe(2)
    const [tx] = await cluster.query<{ transactionId: string }>("SELECT transaction_id AS \"transactionId\" FROM executions WHERE id = $1", [response.body.data.requestId])
    const view = await seenByEach(cluster, `/api/v1/payments/tx/${tx?.transactionId}`, (a) => a.body.data?.escrow_status === "released")
    for (const answer of view.last.values()) {
      expect(answer.body.data).toMatchObject({ amount: "0.011000", agent_earnings: "0.008500", platform_revenue: "0.002500", status: "completed", providing_agent: agentId })
    }
    expect(await cluster.query("SELECT * FROM ledger_unbalanced_transfers")).toEqual([])
  })

  it("a failed execution: EXECUTION_FAILED, payment held; the fold's reputation -2 and health are read the same through both workers within 1 s", async () => {
    const agentId = await register(devAccount(3), (await fake({ kind: "json", status: 500, body: { error: "model crashed" } })).url, { premium: true })
    const agentPath = `/api/v1/agents/${agentId}`
    await readOnEach(cluster, agentPath)

    const response = await execute(devAccount(4), agentId)
    expect(response.status).toBe(502)
    expect(response.body.error?.code).toBe("EXECUTION_FAILED")
    expect(response.body.error?.details).toMatchObject({ status: "failed", settlement: { status: "settled" } })
    const [escrow] = await cluster.query<{ status: string }>("SELECT status FROM escrows WHERE execution_id = $1", [response.body.error?.details.requestId])
    expect(escrow?.status).toBe("held")
    await seenByEach(cluster, agentPath, (a) => reputationIs(48)(a) && Math.abs(Number(a.body.data?.health_score) - 0.9) < 1e-9)
    await seenByEach(cluster, `/api/v1/payments/balance/${agentId}`, (a) =>
      a.body.data?.available === "0.000000" && a.body.data?.escrow?.pendingCount === 1 && a.body.data?.escrow?.pendingTotal === "0.011000")
  })

  it("a dispute resolved for the client: frozen, refunded on chain once; reputation -5, the dispute and the escrow read the same through both workers within 1 s", async () => {
    const agentId = await register(devAccount(5), (await fake()).url)
    const agentPath = `/api/v1/agents/${agentId}`
    const payer = devAccount(6)
    const paid = await execute(payer, agentId)
    expect(paid.status).toBe(200)
    const clientId = paid.headers.get("x-client-id") ?? ""
    expect(clientId).toMatch(/^cl_[0-9a-f]{40}_/)
    const [{ transactionId } = { transactionId: "" }] = await cluster.query<{ transactionId: string }>(
      "SELECT transaction_id AS \"transactionId\" FROM executions WHERE id = $1", [paid.body.data.requestId])
    await seenByEach(cluster, agentPath, reputationIs(51), 5_000) // folded (and cached by both workers)
    const paidBalance = await usdcBalance(payer.address)

    const opened = await cluster.call("/api/v1/disputes", { json: { transactionId, reason: "quality", evidence: "the answer was wrong" }, headers: { "X-Client-Id": clientId } })
    expect(opened.status).toBe(201)
    const id = String(opened.body.data.disputeId)
    await seenByEach(cluster, `/api/v1/payments/tx/${transactionId}`, (a) => a.body.data?.escrow_status === "disputed")
    await seenByEach(cluster, `/api/v1/payments/balance/${agentId}`, (a) => a.body.data?.totalDisputed === "0.008500" && a.body.data?.available === "0.000000")

    const resolved = await cluster.call(`/api/v1/operator/disputes/${id}/resolve`, { json: { resolution: "resolved_client", notes: "output did not match" }, headers: operator })
    expect(resolved.status).toBe(200)
    expect(resolved.body.data).toMatchObject({ status: "resolved_client", client_refund: "0.011000", resolved_by: "operator" })
    await seenByEach(cluster, agentPath, reputationIs(46))
    await seenByEach(cluster, `/api/v1/disputes/${id}`, (a) => a.body.data?.status === "resolved_client")

    await until(() => usdcBalance(payer.address), (b) => b === paidBalance + PRICE, 30_000, "the payer refunded on chain")
    await seenByEach(cluster, `/api/v1/payments/tx/${transactionId}`, (a) => a.body.data?.escrow_status === "refunded", 10_000)
    const again = await cluster.call(`/api/v1/operator/disputes/${id}/resolve`, { json: { resolution: "resolved_agent" }, headers: operator })
    expect(again.status).toBe(409)
    expect(again.body.error?.code).toBe("DISPUTE_CLOSED")
    const events = await cluster.query<{ eventType: string }>("SELECT event_type AS \"eventType\" FROM outbox_events WHERE payload->>'disputeId' = $1 ORDER BY created_at", [id])
    expect(events.map((e) => e.eventType)).toEqual(["escrow.disputed", "dispute.opened", "dispute.resolved"])
    expect(await usdcBalance(payer.address)).toBe(paidBalance + PRICE)
  })

  it("a withdrawal: taken from available at once through both workers, paid on chain net of the fee, booked once", async () => {
    const owner = devAccount(7)
    const agentId = await register(owner, (await fake()).url, { premium: true, basePrice: "2.00" })
    expect((await execute(devAccount(8), agentId, "earn")).status).toBe(200)
    const balancePath = `/api/v1/payments/balance/${agentId}`
    await seenByEach(cluster, balancePath, (a) => a.body.data?.available === "1.700000")
    const destination = privateKeyToAccount(`0x${randomBytes(32).toString("hex")}`).address.toLowerCase() as `0x${string}`

    // Another address than the registered wallet: the owner signs the payout itself (docs/withdrawals.md).
    const authorization = await signPayout(owner, { agentId, amount: 1_500_000n, destination })
    const accepted = await cluster.call("/api/v1/payments/withdraw", {
      json: { agentId, amount: "1.50", destinationWallet: destination, authorization },
      headers: await walletAuth(owner, agentId)
    })
    expect(accepted.status).toBe(202)
    expect(accepted.body.data).toMatchObject({ agentId, amount: "1.500000", fee: "0.100000", netAmount: "1.400000", destinationWallet: destination, status: "pending" })
    const id = String(accepted.body.data.withdrawalId)
    await seenByEach(cluster, balancePath, (a) => a.body.data?.available === "0.200000")

    await until(() => usdcBalance(destination), (b) => b === 1_400_000n, 30_000, "the payout on chain")
    const done = await seenByEach(cluster, `/api/v1/payments/withdrawal/${id}`, (a) => a.body.data?.status === "completed", 10_000)
    for (const answer of done.last.values()) expect(answer.body.data).toMatchObject({ id, agent_id: agentId, amount: "1.500000", net_amount: "1.400000", destination_wallet: destination })
    await seenByEach(cluster, `/api/v1/payments/withdrawals/${agentId}`, (a) =>
      JSON.stringify(a.body.data?.summary) === JSON.stringify({ totalCount: 1, totalWithdrawn: "1.500000", pendingAmount: "0.000000" }))
    await seenByEach(cluster, balancePath, (a) => a.body.data?.totalWithdrawn === "1.500000")
    const events = await cluster.query<{ eventType: string }>("SELECT event_type AS \"eventType\" FROM outbox_events WHERE payload->>'withdrawalId' = $1 ORDER BY created_at", [id])
    expect(events.map((e) => e.eventType)).toEqual(["withdrawal.requested", "withdrawal.completed"])
    expect(await usdcBalance(destination)).toBe(1_400_000n)
  })

  it("any writer: an agent row changed straight in the database (as a worker, a probe or a script would) reads the same through both workers within 1 s", async () => {
    const agentId = await register(devAccount(9), (await fake()).url)
    const agentPath = `/api/v1/agents/${agentId}`
    await readOnEach(cluster, agentPath)
    await cluster.query("UPDATE agents SET health_score = 0.25, reputation_score = 77, trust_tier = 'trusted', status = 'inactive' WHERE id = $1", [agentId])
    await seenByEach(cluster, agentPath, (a) =>
      reputationIs(77)(a) && a.body.data?.health_score === 0.25 && a.body.data?.trustTier === "trusted" && a.body.data?.status === "inactive")
    // The health prober's lease alone is not a change anyone reads: it notifies nothing, the cache keeps serving.
    await cluster.query("UPDATE agents SET health_checked_at = now() WHERE id = $1", [agentId])
    const cached = await seenByEach(cluster, agentPath, (a) => a.body.meta?.cacheSource === "memory", 5_000)
    expect(cached.last.size).toBe(2)
  })

  it("a lost listening connection: the workers' caches read from the database meanwhile (never stale), then listen again and serve hits", async () => {
    const agentId = await register(devAccount(2), (await fake()).url)
    const agentPath = `/api/v1/agents/${agentId}`
    await readOnEach(cluster, agentPath)
    // Every listening connection of both workers (the agent cache's and the webhook dispatcher's) is cut.
    const cut = await cluster.query<{ pid: number }>(
      "SELECT pg_terminate_backend(pid), pid FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND datname = current_database()")
    expect(cut.length).toBeGreaterThanOrEqual(2)
    // Written while nobody listens: its notification reaches no one.
    await cluster.query("UPDATE agents SET reputation_score = 12 WHERE id = $1", [agentId])
    await seenByEach(cluster, agentPath, reputationIs(12))
    const back = await seenByEach(cluster, agentPath, (a) => a.body.meta?.cacheSource === "memory", 15_000)
    for (const answer of back.last.values()) expect(answer.body.data.reputation_score).toBe(12)
    const listening = await cluster.query("SELECT pid FROM pg_stat_activity WHERE query = 'LISTEN agent_cache_invalidate' AND datname = current_database()")
    expect(listening).toHaveLength(2)
  })

  it("at the end, the ledger's treasury equals the treasury's USDC on chain, to the micro-USDC", async () => {
    const books = async () => {
      const [row] = await cluster.query<{ total: string }>("SELECT COALESCE(SUM(amount), 0)::text AS total FROM ledger_entries WHERE account_id = 'treasury'")
      return [BigInt(row?.total ?? "0"), await usdcBalance(TREASURY)] as const
    }
    const [ledger, chain] = await until(books, ([l, c]) => l === c, 30_000, "the ledger's treasury equals the chain's")
    expect(ledger).toBe(chain)
  })
})
