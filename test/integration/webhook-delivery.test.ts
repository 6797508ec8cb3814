// Webhook delivery end to end: events from a paid call reach a real receiver on loopback, signed the spec's way and the
// Standard Webhooks way (verified here by independent code); retries at 1 s, 2 s, 4 s and 5 min (TestClock); the 5th
// failure dead-letters; requeue delivers again; 10 consecutive failures switch the subscription off.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { Webhook } from "standardwebhooks"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { echoCapability, execute, registerAgent } from "../support/scenario.js"
import { TreasuryWorker } from "../../services/treasury/TreasuryWorker.js"
import { WEBHOOK_EVENTS } from "../../services/webhooks/events.js"
import { OPERATOR_TOKEN } from "../support/harness.js"

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** Signed at the service's (test) clock, which these tests move hours ahead; never the same millisecond twice. */
let signedAt = 0
const signedNow = (owner: ReturnType<typeof devAccount>, agentId: string) =>
  Effect.flatMap(TestClock.currentTimeMillis, (now) => {
    signedAt = signedAt >= now && signedAt < now + 1_000 ? signedAt + 1 : now
    const timestamp = signedAt
    return Effect.promise(() => walletAuth(owner, agentId, { timestamp }))
  })

interface Received {
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

/** A receiver on loopback that answers `answer` in turn (the last one from then on); closed with the test's scope. */
const receiver = (statuses: Array<number>) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly received: Array<Received>; readonly answer: Array<number>; readonly server: http.Server }>((resume) => {
      const received: Array<Received> = []
      const answer = [...statuses]
      const server = http.createServer((req, res) => {
        let body = ""
        req.on("data", (c: Buffer) => (body += c.toString("utf8")))
        req.on("end", () => {
          received.push({ headers: req.headers, body })
          const status = (answer.length > 1 ? answer.shift() : answer[0]) ?? 200
          res.writeHead(status, { "content-type": "text/plain" }).end(status < 300 ? "ok" : "receiver down")
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received, answer, server })))
    }),
    ({ server }) => Effect.sync(() => server.close())
  )

const api = (path: string, init: { method?: string; json?: unknown; headers?: Record<string, string> } = {}) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() =>
      call(`${baseUrl}${path}`, { method: init.method ?? (init.json === undefined ? "GET" : "POST"), ...(init.json === undefined ? {} : { json: init.json }), headers: init.headers ?? {} })))

/**
 * What a receiver does with the secret: both signatures checked with constant-time comparisons. The spec's header is
 * keyed with the secret as returned; Standard Webhooks' with the bytes of the base64 after whsec_.
 */
const verify = (secret: string, r: Received) => {
  const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b))
  const spec = `sha256=${createHmac("sha256", secret).update(r.body).digest("hex")}`
  const id = String(r.headers["webhook-id"])
  const ts = String(r.headers["webhook-timestamp"])
  const standardKey = Buffer.from(secret.replace(/^whsec_/, ""), "base64")
  const standard = `v1,${createHmac("sha256", standardKey).update(`${id}.${ts}.${r.body}`).digest("base64")}`
  return same(String(r.headers["x-webhook-signature"]), spec) && same(String(r.headers["webhook-signature"]), standard)
}

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("webhook delivery", (it) => {
  it.scoped("signed deliveries retried at 1 s, 2 s, 4 s and 5 min until the receiver answers 2xx; every attempt logged", () =>
    Effect.gen(function* () {
      yield* realNow
      const dispatcher = yield* Dispatcher
      const owner = devAccount(1)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([500, 503, 500, 502, 200])
      const created = yield* api("/api/v1/webhooks", { json: { agentId, url: hook.url, events: ["execution.completed"] }, headers: yield* Effect.promise(() => walletAuth(owner, agentId)) })
      const { id, secret } = created.body.data
      const paid = yield* execute(devAccount(2), { targetAgentId: agentId, capabilityId: "echo", input: { text: "hook me" } })
      expect(paid.status).toBe(200)

      expect(yield* dispatcher.dispatchDue).toBeGreaterThan(0)
      yield* dispatcher.sendDue
      expect(hook.received).toHaveLength(1)
      for (const wait of [1_000, 2_000, 4_000, 300_000]) {
        yield* TestClock.adjust(wait - 100)
        yield* dispatcher.sendDue
        const before = hook.received.length
        yield* TestClock.adjust(100)
        yield* dispatcher.sendDue
        expect(hook.received.length).toBe(before + 1)
      }
      expect(hook.received.map((r) => r.headers["x-webhook-attempt"])).toEqual(["1", "2", "3", "4", "5"])
      for (const r of hook.received) {
        expect(verify(secret, r)).toBe(true)
        expect(r.headers).toMatchObject({ "x-webhook-id": id, "x-webhook-event": "execution.completed", "user-agent": "service-webhooks/1.0", "content-type": "application/json" })
      }
      // The same bytes every time, the spec's envelope and data shape.
      expect(new Set(hook.received.map((r) => r.body)).size).toBe(1)
      const body = JSON.parse(hook.received[0]!.body)
      expect(body).toMatchObject({ event: "execution.completed", data: { requestId: paid.body.data.requestId, agentId, capabilityId: "echo", earnings: "0.008500" } })
      expect(new Date(body.timestamp).toISOString()).toBe(body.timestamp)
      expect(verify(secret.replace(/.$/, secret.endsWith("A") ? "B" : "A"), hook.received[0]!)).toBe(false)
      // The unmodified `standardwebhooks` package verifies the first attempt (sent at the real time: it checks the
      // timestamp against its own clock) and refuses a changed body.
      const first = hook.received[0]!
      const standardHeaders = { "webhook-id": String(first.headers["webhook-id"]), "webhook-timestamp": String(first.headers["webhook-timestamp"]), "webhook-signature": String(first.headers["webhook-signature"]) }
      expect(new Webhook(secret).verify(first.body, standardHeaders)).toMatchObject({ event: "execution.completed" })
      expect(() => new Webhook(secret).verify(first.body.replace("0.008500", "9.008500"), standardHeaders)).toThrow()

      const auth = () => signedNow(owner, agentId)
      const list = yield* api(`/api/v1/webhooks/${id}/deliveries`, { headers: yield* auth() })
      expect(list.body.data.deliveries).toEqual([expect.objectContaining({ event_type: "execution.completed", status: "delivered", attempt_count: 5, response_status: 200 })])
      const logs = yield* api(`/api/v1/webhooks/${id}/deliveries/${list.body.data.deliveries[0].id}/logs`, { headers: yield* auth() })
      expect(logs.body.data.attempts.map((a: { response_status: number }) => a.response_status)).toEqual([500, 503, 500, 502, 200])
      expect(logs.body.data.attempts[0]).toMatchObject({ attempt_number: 1, response_body: "receiver down", error_message: "the receiver answered 500" })
      // The test endpoint: one signed post now, answered with the receiver's status.
      const tested = yield* api(`/api/v1/webhooks/${id}/test`, { method: "POST", headers: yield* auth() })
      expect(tested.body.data).toEqual({ success: true, status: 200, message: "the endpoint answered 2xx" })
      expect(verify(secret, hook.received[5]!)).toBe(true)
      expect(JSON.parse(hook.received[5]!.body)).toMatchObject({ event: "webhook.test", data: { webhookId: id } })
      const sub = (yield* api(`/api/v1/webhooks/agent/${agentId}`, { headers: yield* auth() })).body.data.webhooks[0]
      expect(sub).toMatchObject({ isActive: true, failure_count: 0 })
      expect(sub.last_success).not.toBeNull()
    }))

  it.scoped("after 5 failures a delivery is dead-lettered; 10 in a row switch the webhook off; requeue after re-enabling delivers once", () =>
    Effect.gen(function* () {
      yield* realNow
      const dispatcher = yield* Dispatcher
      const owner = devAccount(3)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([500])
      const auth = () => signedNow(owner, agentId)
      const { id } = (yield* api("/api/v1/webhooks", { json: { agentId, url: hook.url, events: ["execution.completed"] }, headers: yield* auth() })).body.data
      // Two paid calls (paid now: the test clock then runs 25 minutes ahead of the payments' validity).
      for (const text of ["one", "two"]) {
        expect((yield* execute(devAccount(4), { targetAgentId: agentId, capabilityId: "echo", input: { text } })).status).toBe(200)
      }
      yield* dispatcher.dispatchDue
      for (let round = 1; round <= 5; round++) {
        yield* dispatcher.sendDue
        expect(hook.received).toHaveLength(2 * round)
        yield* TestClock.adjust(300_001)
      }
      const dead = (yield* api(`/api/v1/webhooks/${id}/dead-letter`, { headers: yield* auth() })).body.data
      expect(dead.deadLetterQueue).toHaveLength(2)
      expect(dead.deadLetterQueue[0]).toMatchObject({ event_type: "execution.completed", total_attempts: 5, last_error: "the receiver answered 500", requeued_at: null })
      expect(dead.pagination).toEqual({ total: 2, limit: 20, offset: 0, hasMore: false })
      // 10 failed attempts in a row: the webhook is switched off.
      const off = (yield* api(`/api/v1/webhooks/agent/${agentId}`, { headers: yield* auth() })).body.data.webhooks[0]
      expect(off).toMatchObject({ isActive: false, failure_count: 10 })

      hook.answer.splice(0, hook.answer.length, 204)
      yield* api(`/api/v1/webhooks/${id}`, { method: "PATCH", json: { isActive: true }, headers: yield* auth() })
      const entry = (yield* api(`/api/v1/webhooks/${id}/dead-letter`, { headers: yield* auth() })).body.data.deadLetterQueue[0]
      const requeued = yield* api(`/api/v1/webhooks/${id}/dead-letter/${entry.id}/requeue`, { method: "POST", headers: yield* auth() })
      expect(requeued.body.data).toMatchObject({ originalDlqId: entry.id })
      expect(requeued.body.data.newDeliveryId).toMatch(/^del_/)
      const twice = yield* api(`/api/v1/webhooks/${id}/dead-letter/${entry.id}/requeue`, { method: "POST", headers: yield* auth() })
      expect(twice.body.error?.code).toBe("DELIVERY_ALREADY_REQUEUED")
      yield* dispatcher.sendDue
      expect(hook.received).toHaveLength(11)
      expect(hook.received[10]!.headers["webhook-id"]).toBe(requeued.body.data.newDeliveryId)
      const original = hook.received.find((r) => r.headers["webhook-id"] === entry.delivery_id)
      expect(hook.received[10]!.body).toBe(original?.body)
      yield* dispatcher.sendDue
      expect(hook.received).toHaveLength(11)
    }))

  it.scoped("a switched-off webhook's pending delivery is left alone (not leased, its due time kept) and goes out once it is switched on", () =>
    Effect.gen(function* () {
      yield* realNow
      const dispatcher = yield* Dispatcher
      const { sql } = yield* TestEnv
      const owner = devAccount(8)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([200])
      const auth = () => signedNow(owner, agentId)
      const { id } = (yield* api("/api/v1/webhooks", { json: { agentId, url: hook.url, events: ["execution.completed"] }, headers: yield* auth() })).body.data
      expect((yield* execute(devAccount(2), { targetAgentId: agentId, capabilityId: "echo", input: { text: "paused" } })).status).toBe(200)
      yield* dispatcher.dispatchDue
      yield* api(`/api/v1/webhooks/${id}`, { method: "PATCH", json: { isActive: false }, headers: yield* auth() })
      const due = () => sql<{ nextAttemptAt: Date; status: string }>`SELECT next_attempt_at, status FROM webhook_deliveries WHERE subscription_id = ${id}`
      const [before] = yield* due()
      yield* dispatcher.sendDue
      yield* TestClock.adjust(60_000)
      yield* dispatcher.sendDue
      expect(hook.received).toHaveLength(0)
      expect(yield* due()).toEqual([before])
      yield* api(`/api/v1/webhooks/${id}`, { method: "PATCH", json: { isActive: true }, headers: yield* auth() })
      yield* dispatcher.sendDue
      expect(hook.received).toHaveLength(1)
      expect((yield* due())[0]?.status).toBe("delivered")
    }))

  it.scoped("concurrent dispatchers and senders (as several processes would run them) deliver each event to each webhook once", () =>
    Effect.gen(function* () {
      yield* realNow
      const dispatcher = yield* Dispatcher
      const owner = devAccount(5)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([200])
      for (let i = 0; i < 3; i++) {
        const created = yield* api("/api/v1/webhooks", { json: { agentId, url: `${hook.url}?n=${i}`, events: ["execution.completed", "escrow.released"] }, headers: yield* signedNow(owner, agentId) })
        expect(created.status).toBe(201)
      }
      for (const text of ["a", "b"]) expect((yield* execute(devAccount(6), { targetAgentId: agentId, capabilityId: "echo", input: { text } })).status).toBe(200)
      yield* Effect.all([dispatcher.dispatchDue, dispatcher.dispatchDue, dispatcher.dispatchDue], { concurrency: "unbounded" })
      yield* Effect.all([dispatcher.sendDue, dispatcher.sendDue, dispatcher.sendDue, dispatcher.sendDue], { concurrency: "unbounded" })
      yield* dispatcher.sendDue
      // 2 calls × 2 subscribed events × 3 webhooks, each exactly once.
      const keys = hook.received.map((r) => `${r.headers["x-webhook-id"]}:${JSON.parse(r.body).event}:${JSON.parse(r.body).data.transactionId ?? JSON.parse(r.body).data.requestId}`)
      expect(hook.received).toHaveLength(12)
      expect(new Set(keys).size).toBe(12)
      expect(new Set(hook.received.map((r) => r.headers["webhook-id"])).size).toBe(12)
    }))

  it.scoped("a process that claimed a delivery and died before posting: after its lease another pass delivers it, once", () =>
    Effect.gen(function* () {
      yield* realNow
      const dispatcher = yield* Dispatcher
      const { sql } = yield* TestEnv
      const owner = devAccount(7)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([200])
      yield* api("/api/v1/webhooks", { json: { agentId, url: hook.url, events: ["execution.completed"] }, headers: yield* signedNow(owner, agentId) })
      expect((yield* execute(devAccount(8), { targetAgentId: agentId, capabilityId: "echo", input: { text: "crash" } })).status).toBe(200)
      yield* dispatcher.dispatchDue
      // The "dead" process: it leased the delivery (as sendDue does) and never posted or recorded anything.
      const now = yield* TestClock.currentTimeMillis
      const leased = yield* sql`UPDATE webhook_deliveries SET next_attempt_at = ${new Date(now + 15_000)} WHERE status = 'pending' RETURNING id`
      expect(leased).toHaveLength(1)
      yield* dispatcher.sendDue
      expect(hook.received).toHaveLength(0)
      yield* TestClock.adjust(15_001)
      yield* dispatcher.sendDue
      yield* dispatcher.sendDue
      expect(hook.received).toHaveLength(1)
      expect(hook.received[0]!.headers["x-webhook-attempt"]).toBe("1")
    }))

  it.scoped("every non-chain event of the spec reaches a `*` webhook from the operation it describes, and nothing else does", () =>
    Effect.gen(function* () {
      yield* realNow
      const dispatcher = yield* Dispatcher
      const treasury = yield* TreasuryWorker
      const owner = devAccount(9)
      const agentId = yield* registerAgent(owner, (yield* fakeAgent("echo")).url, {
        tier: "premium",
        capabilities: [echoCapability({ pricing: { model: "per-request", basePrice: "2.00", currency: "USDC" } })]
      })
      const failing = devAccount(2)
      const failingId = yield* registerAgent(failing, (yield* fakeAgent({ kind: "json", status: 500, body: { error: "down" } })).url, { tier: "premium" })
      const hook = yield* receiver([200])
      yield* api("/api/v1/webhooks", { json: { agentId, url: hook.url }, headers: yield* signedNow(owner, agentId) })
      yield* api("/api/v1/webhooks", { json: { agentId: failingId, url: hook.url }, headers: yield* signedNow(failing, failingId) })

      const paid = yield* execute(devAccount(6), { targetAgentId: agentId, capabilityId: "echo", input: { text: "all events" } }) // payment.received, execution.completed, escrow.released
      expect(paid.status).toBe(200)
      expect((yield* execute(devAccount(6), { targetAgentId: failingId, capabilityId: "echo", input: { text: "x" } })).status).toBe(502) // execution.failed
      const opened = yield* api("/api/v1/disputes", { json: { transactionId: paid.body.data.requestId, reason: "quality" }, headers: { "X-Client-Id": paid.headers.get("x-client-id") ?? "" } }) // escrow.disputed, dispute.opened
      expect(opened.status).toBe(201)
      yield* api(`/api/v1/operator/disputes/${opened.body.data.disputeId}/resolve`, { json: { resolution: "resolved_agent" }, headers: { authorization: `Bearer ${OPERATOR_TOKEN}`, "x-operator": "test" } }) // dispute.resolved
      const withdrawn = yield* api("/api/v1/payments/withdraw", { json: { agentId, amount: "1.00" }, headers: yield* signedNow(owner, agentId) })
      expect(withdrawn.status).toBe(202)
      yield* treasury.processDue // withdrawal.completed

      yield* dispatcher.dispatchDue
      yield* dispatcher.sendDue
      const types = new Set(hook.received.map((r) => JSON.parse(r.body).event as string))
      expect([...types].sort()).toEqual([
        "dispute.opened",
        "dispute.resolved",
        "escrow.disputed",
        "escrow.released",
        "execution.completed",
        "execution.failed",
        "payment.received",
        "withdrawal.completed"
      ])
      for (const t of types) expect(WEBHOOK_EVENTS).toContain(t)
      const resolved = hook.received.map((r) => JSON.parse(r.body)).find((b) => b.event === "dispute.resolved")
      expect(resolved.data).toMatchObject({ disputeId: opened.body.data.disputeId, resolution: "resolved_agent", reputationDelta: 2 })
    }), { timeout: 60_000 })
})
