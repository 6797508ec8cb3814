// Webhook delivery across real server processes (the start script, as deployed) on one database and the run's devnet:
// two processes post each attempt of each delivery exactly once; a process killed with SIGKILL mid-delivery leaves its
// deliveries (a webhook and an execution callback) to the restarted one, which posts them after the lease.
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { PrivateKeyAccount } from "viem/accounts"
import { beforeAll } from "vitest"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, paidCall, walletAuth } from "../support/clients.js"
import { registerAgentAt, sharedSettings, untilProcesses } from "../support/processes.js"
import { type Received, receiver } from "../support/receivers.js"
import { ensureBundle, killHard, type ServerProcess, serverProcess } from "../support/servers.js"

beforeAll(ensureBundle, 180_000)

const subscribe = (server: ServerProcess, owner: PrivateKeyAccount, agentId: string, url: string, events: ReadonlyArray<string>) =>
  Effect.promise(async () => {
    const created = await call(`${server.baseUrl}/api/v1/webhooks`, { method: "POST", json: { agentId, url, events }, headers: await walletAuth(owner, agentId) })
    if (created.status !== 201) throw new Error(`subscription refused: ${JSON.stringify(created.body)}`)
    return String(created.body.data.id)
  })

const key = (r: Received) => `${String(r.headers["x-webhook-delivery-id"])}#${String(r.headers["x-webhook-attempt"])}`

describe("webhook delivery with real server processes", () => {
  it.scopedLive("two server processes on one database post each attempt of each delivery exactly once", () =>
    Effect.gen(function* () {
      const { env, query } = yield* sharedSettings()
      const [one, two] = yield* Effect.all([serverProcess(env), serverProcess(env)], { concurrency: 2 })
      const owner = devAccount(1)
      const agentId = yield* registerAgentAt(one, owner, (yield* fakeAgent("echo")).url)
      // Every other delivery fails its first attempt and succeeds on its second (after ~1 s): retries to share out too.
      // (Not every one: 10 failures in a row switch the subscription off, as the spec says, and its deliveries wait.)
      let firsts = 0
      const failedFirst = new Set<string>()
      const hook = yield* receiver((r) => {
        if (r.headers["x-webhook-attempt"] !== "1" || firsts++ % 2 === 1) return 200
        failedFirst.add(String(r.headers["x-webhook-delivery-id"]))
        return 500
      })
      const subscriptionId = yield* subscribe(two, owner, agentId, hook.url, ["*"])
      // Six paid calls, alternately through each process: payment.received, execution.completed, escrow.released each.
      for (let i = 0; i < 6; i++) {
        const server = i % 2 === 0 ? one : two
        const paid = yield* Effect.promise(() =>
          paidCall(devAccount(2 + (i % 3)), `${server.baseUrl}/api/v1/execute`, { json: { targetAgentId: agentId, capabilityId: "echo", input: { text: `call ${i}` } } }))
        expect(paid.status).toBe(200)
      }
      const counts = () =>
        query<{ total: number; delivered: number }>(
          "SELECT count(*)::int AS total, count(*) FILTER (WHERE status = 'delivered')::int AS delivered FROM webhook_deliveries WHERE subscription_id = $1",
          [subscriptionId]
        ).pipe(Effect.map((rows) => rows[0] ?? { total: 0, delivered: 0 }))
      const done = yield* untilProcesses(counts(), (c) => c.total >= 18 && c.delivered === c.total, 60_000)
      // A second post of an attempt would be in flight alongside the first: give it time to land.
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 1_000)))

      const perAttempt = new Map<string, number>()
      for (const r of hook.received) perAttempt.set(key(r), (perAttempt.get(key(r)) ?? 0) + 1)
      expect([...perAttempt.values()].filter((n) => n !== 1)).toEqual([])
      const deliveryIds = new Set(hook.received.map((r) => String(r.headers["x-webhook-delivery-id"])))
      expect(deliveryIds.size).toBe(done.total)
      expect(failedFirst.size).toBeGreaterThanOrEqual(Math.floor(done.total / 2))
      expect(hook.received).toHaveLength(done.total + failedFirst.size)
      for (const id of deliveryIds) {
        expect([perAttempt.get(`${id}#1`), perAttempt.get(`${id}#2`)]).toEqual(failedFirst.has(id) ? [1, 1] : [1, undefined])
      }
      // Each event once: one delivery per (event, subject).
      const subjects = new Set(hook.received.map((r) => {
        const body = JSON.parse(r.body) as { event: string; data: Record<string, unknown> }
        return `${body.event}:${String(body.data["requestId"] ?? body.data["transactionId"] ?? body.data["paymentId"])}`
      }))
      expect(subjects.size).toBe(done.total)
      const logged = yield* query<{ n: number }>(
        "SELECT count(*)::int AS n FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id WHERE d.subscription_id = $1",
        [subscriptionId]
      )
      expect(logged[0]?.n).toBe(done.total + failedFirst.size)
      const [subscription] = yield* query<{ isActive: boolean; failureCount: number }>(
        "SELECT is_active AS \"isActive\", failure_count AS \"failureCount\" FROM webhook_subscriptions WHERE id = $1", [subscriptionId])
      expect(subscription).toEqual({ isActive: true, failureCount: 0 })
    }), { timeout: 180_000 })

  it.scopedLive("a server killed with SIGKILL mid-delivery: after a restart the webhook and the callback it was posting arrive, the attempt logged once", () =>
    Effect.gen(function* () {
      // A 5 s attempt limit makes the lease 10 s (the spec's 10 s would make it 15 s).
      const { env, query } = yield* sharedSettings({ WEBHOOK_ATTEMPT_TIMEOUT_MS: "5000" })
      const first = yield* serverProcess(env)
      const owner = devAccount(5)
      const agentId = yield* registerAgentAt(first, owner, (yield* fakeAgent("echo")).url)
      const hook = yield* receiver([200])
      yield* subscribe(first, owner, agentId, hook.url, ["execution.completed"])
      // The receiver holds its posts open: the process is killed while it waits for both answers.
      let bothHeld: () => void = () => {}
      const held = new Promise<void>((resolve) => (bothHeld = resolve))
      hook.hold = () => {
        if (hook.received.length >= 2) bothHeld()
      }
      const paid = yield* Effect.promise(() =>
        paidCall(devAccount(6), `${first.baseUrl}/api/v1/execute`, { json: { targetAgentId: agentId, capabilityId: "echo", input: { text: "crash" }, callbackUrl: `${hook.url}?callback` } }))
      expect(paid.status).toBe(202)
      yield* Effect.promise(() => Promise.race([held, new Promise((_, reject) => setTimeout(() => reject(new Error("posts not held within 30 s")), 30_000))]))
      expect(yield* killHard(first)).toMatchObject({ signal: "SIGKILL" })
      const heldIds = hook.received.map((r) => String(r.headers["x-webhook-delivery-id"]))
      hook.hold = undefined

      yield* serverProcess(env)
      const rows = () =>
        query<{ id: string; target: string; status: string; attemptCount: number }>(
          "SELECT id, target, status, attempt_count AS \"attemptCount\" FROM webhook_deliveries ORDER BY target"
        )
      const delivered = yield* untilProcesses(rows(), (r) => r.length === 2 && r.every((d) => d.status === "delivered"), 60_000)
      expect(delivered.map((d) => [d.target, d.attemptCount])).toEqual([["callback", 1], ["subscription", 1]])
      expect(new Set(heldIds)).toEqual(new Set(delivered.map((d) => d.id)))
      // Each was posted by the killed process (held) and again by the restarted one: attempt 1 both times, at least once.
      for (const id of heldIds) {
        const posts = hook.received.filter((r) => r.headers["x-webhook-delivery-id"] === id)
        expect(posts.length).toBeGreaterThanOrEqual(2)
        expect(posts.every((r) => r.headers["x-webhook-attempt"] === "1")).toBe(true)
        expect(new Set(posts.map((r) => r.body)).size).toBe(1)
        const attempts = yield* query<{ attemptNumber: number; responseStatus: number }>(
          "SELECT attempt_number AS \"attemptNumber\", response_status AS \"responseStatus\" FROM webhook_attempts WHERE delivery_id = $1",
          [id]
        )
        expect(attempts).toEqual([{ attemptNumber: 1, responseStatus: 200 }])
      }
      const callback = hook.received.find((r) => r.headers["x-webhook-id"] === paid.body.data.requestId)
      expect(JSON.parse(callback?.body ?? "{}")).toMatchObject({ requestId: paid.body.data.requestId, status: "completed" })
    }), { timeout: 180_000 })
})
