// Execution callbacks on the webhook delivery machinery: a callbackUrl is retried at 1 s, 2 s, … (TestClock), every
// attempt logged and signed with the key from the client's X-PAYMENT; dead after 5 failures (no subscription to touch);
// a retry's new result supersedes the failure's pending post; the status view shows how the callback went.
import { expect, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import { Dispatcher } from "../../services/webhooks/Dispatcher.js"
import { fakeAgent } from "../support/agents.js"
import { call, devAccount, walletAuth } from "../support/clients.js"
import { TestApp, TestEnv } from "../support/harness.js"
import { type Received, receiver, untilReal } from "../support/receivers.js"
import { execute, registerAgent } from "../support/scenario.js"

const realNow = Effect.flatMap(Effect.sync(() => Date.now()), (now) => TestClock.setTime(now))

/** What a client does with its callback: the spec's signature checked in constant time with the key it can derive. */
const signedWith = (paymentHeader: string, r: Received) => {
  const key = createHash("sha256").update(paymentHeader).digest("hex")
  const expected = `sha256=${createHmac("sha256", key).update(r.body).digest("hex")}`
  const given = String(r.headers["x-webhook-signature"] ?? "")
  return given.length === expected.length && timingSafeEqual(Buffer.from(given), Buffer.from(expected))
}

interface DeliveryState {
  readonly id: string
  readonly status: string
  readonly attemptCount: number
  readonly eventType: string
}

/** The callback deliveries of an execution, oldest first. */
const callbacksOf = (requestId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<DeliveryState>`SELECT id, status, attempt_count, event_type FROM webhook_deliveries WHERE execution_id = ${requestId} AND target = 'callback' ORDER BY seq`.pipe(Effect.orDie))

const attemptsOf = (deliveryId: string) =>
  Effect.flatMap(TestEnv, ({ sql }) =>
    sql<{ attemptNumber: number; responseStatus: number | null; errorMessage: string | null }>`
      SELECT attempt_number, response_status, error_message FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY attempt_number`.pipe(Effect.orDie))

const statusView = (requestId: string, paymentHeader?: string) =>
  Effect.flatMap(TestEnv, ({ baseUrl }) =>
    Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}`, { headers: paymentHeader === undefined ? {} : { "X-PAYMENT": paymentHeader } })))

/** A paid call with a callback URL (202), and its payment header. */
const callWithCallback = (payer: number, agentId: string, url: string, text: string) =>
  Effect.gen(function* () {
    const response = yield* execute(devAccount(payer), { targetAgentId: agentId, capabilityId: "echo", input: { text }, callbackUrl: url })
    expect(response.status).toBe(202)
    return { requestId: String(response.body.data.requestId), paymentHeader: response.headers.get("x-payment-used") ?? "" }
  })

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("execution callbacks", (it) => {
  it.scoped("a receiver that fails twice gets the result on the third attempt (after 1 s and 2 s), signed with the payment header's key; each attempt is logged and shown", () =>
    Effect.gen(function* () {
      yield* realNow
      const sender = yield* Dispatcher
      const agentId = yield* registerAgent(devAccount(1), (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([500, 503, 200])
      const { requestId, paymentHeader } = yield* callWithCallback(2, agentId, hook.url, "call me back")
      // The execution finishes in the background (settled and released): then its callback is due.
      const [delivery] = yield* untilReal(callbacksOf(requestId), (rows) => rows.length === 1)

      yield* sender.sendDue
      expect(hook.received).toHaveLength(1)
      for (const wait of [1_000, 2_000]) {
        yield* TestClock.adjust(wait - 100)
        yield* sender.sendDue
        expect(hook.received.length).toBe(wait === 1_000 ? 1 : 2)
        yield* TestClock.adjust(100)
        yield* sender.sendDue
      }
      expect(hook.received).toHaveLength(3)
      expect(hook.received.map((r) => r.headers["x-webhook-attempt"])).toEqual(["1", "2", "3"])
      for (const r of hook.received) {
        expect(signedWith(paymentHeader, r)).toBe(true)
        expect(r.headers).toMatchObject({
          "x-webhook-id": requestId,
          "x-webhook-event": "execution.completed",
          "x-webhook-delivery-id": delivery!.id,
          "user-agent": "service-webhooks/1.0",
          "content-type": "application/json"
        })
      }
      expect(signedWith(`${paymentHeader}x`, hook.received[0]!)).toBe(false)
      // The same bytes each time: the spec's result post.
      expect(new Set(hook.received.map((r) => r.body)).size).toBe(1)
      expect(JSON.parse(hook.received[0]!.body)).toMatchObject({ requestId, status: "completed", output: { echo: { text: "call me back" } }, cost: { total: "0.011000" } })

      expect(yield* callbacksOf(requestId)).toEqual([{ id: delivery!.id, status: "delivered", attemptCount: 3, eventType: "execution.completed" }])
      expect(yield* attemptsOf(delivery!.id)).toEqual([
        { attemptNumber: 1, responseStatus: 500, errorMessage: "the receiver answered 500" },
        { attemptNumber: 2, responseStatus: 503, errorMessage: "the receiver answered 503" },
        { attemptNumber: 3, responseStatus: 200, errorMessage: null }
      ])
      // The client sees how its callback went (with its payment header only).
      const shown = (yield* statusView(requestId, paymentHeader)).body.data
      expect(shown.callback).toMatchObject({ deliveryId: delivery!.id, event: "execution.completed", status: "delivered", attempts: 3, lastResponseStatus: 200 })
      expect(shown.callback.deliveredAt).toBeDefined()
      expect(shown.callback.lastError).toBeUndefined()
      expect((yield* statusView(requestId)).body.data.callback).toBeUndefined()
      yield* TestClock.adjust(400_000)
      yield* sender.sendDue
      expect(hook.received).toHaveLength(3)
    }))

  it.scoped("a callback never answered 2xx is dead after 5 attempts: a dead-letter entry with no subscription, shown as dead; no webhook is touched", () =>
    Effect.gen(function* () {
      yield* realNow
      const { sql } = yield* TestEnv
      const sender = yield* Dispatcher
      const agentId = yield* registerAgent(devAccount(3), (yield* fakeAgent("echo")).url, { tier: "premium" })
      const hook = yield* receiver([500])
      // The agent's owner has a webhook: the client's failing callback must not count against it.
      const { baseUrl } = yield* TestEnv
      const owned = yield* Effect.promise(async () =>
        call(`${baseUrl}/api/v1/webhooks`, { method: "POST", json: { agentId, url: hook.url }, headers: await walletAuth(devAccount(3), agentId) }))
      expect(owned.status).toBe(201)
      const subscriptionsBefore = yield* sql`SELECT id, failure_count, is_active FROM webhook_subscriptions ORDER BY id`
      const { requestId, paymentHeader } = yield* callWithCallback(4, agentId, hook.url, "nobody home")
      const [delivery] = yield* untilReal(callbacksOf(requestId), (rows) => rows.length === 1)
      for (let attempt = 1; attempt <= 5; attempt++) {
        yield* sender.sendDue
        expect(hook.received).toHaveLength(attempt)
        yield* TestClock.adjust(300_001)
      }
      yield* sender.sendDue
      expect(hook.received).toHaveLength(5)
      expect((yield* callbacksOf(requestId))[0]).toMatchObject({ status: "dead", attemptCount: 5 })
      const dead = yield* sql<{ subscriptionId: string | null; totalAttempts: number; lastError: string }>`
        SELECT subscription_id, total_attempts, last_error FROM webhook_dead_letters WHERE delivery_id = ${delivery!.id}`
      expect(dead).toEqual([{ subscriptionId: null, totalAttempts: 5, lastError: "the receiver answered 500" }])
      expect(yield* sql`SELECT id, failure_count, is_active FROM webhook_subscriptions ORDER BY id`).toEqual(subscriptionsBefore)
      const shown = (yield* statusView(requestId, paymentHeader)).body.data
      expect(shown.status).toBe("completed")
      expect(shown.callback).toMatchObject({ status: "dead", attempts: 5, lastResponseStatus: 500, lastError: "the receiver answered 500" })
    }))

  it.scoped("a retry's new result supersedes the failure's pending post: the failure is not posted again, the new result is", () =>
    Effect.gen(function* () {
      yield* realNow
      const sender = yield* Dispatcher
      const agent = yield* fakeAgent({ kind: "fail-times", n: 1, then: "echo" })
      const agentId = yield* registerAgent(devAccount(5), agent.url, { tier: "premium" })
      const hook = yield* receiver([500, 200])
      const { requestId, paymentHeader } = yield* callWithCallback(6, agentId, hook.url, "second time lucky")
      const [failure] = yield* untilReal(callbacksOf(requestId), (rows) => rows.length === 1)
      expect(failure?.eventType).toBe("execution.failed")
      yield* sender.sendDue
      expect(hook.received.map((r) => JSON.parse(r.body).status)).toEqual(["failed"])

      const retried = yield* Effect.flatMap(TestEnv, ({ baseUrl }) =>
        Effect.promise(() => call(`${baseUrl}/api/v1/execute/${requestId}/retry`, { method: "POST", headers: { "X-PAYMENT": paymentHeader } })))
      expect(retried.status).toBe(200)
      const [, success] = yield* untilReal(callbacksOf(requestId), (rows) => rows.length === 2)
      expect(success?.eventType).toBe("execution.completed")
      // The failure's retry falls due with the new result's first attempt: only the new result goes out.
      yield* TestClock.adjust(1_000)
      yield* sender.sendDue
      yield* TestClock.adjust(400_000)
      yield* sender.sendDue
      expect(hook.received.map((r) => [r.headers["x-webhook-delivery-id"], JSON.parse(r.body).status])).toEqual([
        [failure!.id, "failed"],
        [success!.id, "completed"]
      ])
      expect((yield* callbacksOf(requestId)).map((d) => d.status)).toEqual(["superseded", "delivered"])
      expect((yield* statusView(requestId, paymentHeader)).body.data.callback).toMatchObject({ deliveryId: success!.id, status: "delivered" })
    }))
})
