// The outbox dispatcher and the sender: each committed event becomes one delivery per matching active subscription
// (claimed with SKIP LOCKED, so several processes share the work); due deliveries are posted over the guarded outbound
// pool, 10 s per attempt, and each outcome is one step of the delivery's machine with its attempt log.
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Layer, Option, Queue, Schema, Stream } from "effect"
import { request } from "undici"
import { OutboundPool } from "../../layers/outbound/Pool.js"
import { UrlGuard } from "../../layers/UrlGuard.js"
import { MachineHost } from "../../machines/Host.js"
import { startMachine } from "../../machines/step.js"
import { deliveryMachine } from "../../machines/webhookDelivery.js"
import { DeliveriesRepo, type DeliveryRow } from "./DeliveriesRepo.js"
import { matches, WEBHOOK_EVENTS } from "./events.js"
import { WebhooksRepo } from "./Repo.js"
import { WebhookSecrets } from "./Secrets.js"
import { deliveryHeaders } from "./signing.js"

export const ATTEMPT_TIMEOUT_MS = 10_000
const RESPONSE_EXCERPT_BYTES = 1_024
const LEASE_MS = ATTEMPT_TIMEOUT_MS + 5_000

const OutboxRow = Schema.Struct({ id: Schema.String, eventType: Schema.String, agentId: Schema.NullOr(Schema.String), payload: Schema.Unknown, createdAt: Schema.DateFromSelf })

export class Dispatcher extends Effect.Service<Dispatcher>()("webhooks/Dispatcher", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const subscriptions = yield* WebhooksRepo
    const deliveries = yield* DeliveriesRepo
    const secrets = yield* WebhookSecrets
    const host = yield* MachineHost
    const pool = yield* OutboundPool
    const urlGuard = yield* UrlGuard

    /** One pass: up to 200 undispatched events become deliveries and are marked dispatched, in one transaction. */
    const dispatchDue = sql.withTransaction(
      Effect.gen(function* () {
        const events = yield* sql`SELECT id, event_type, agent_id, payload, created_at FROM outbox_events WHERE dispatched_at IS NULL
                                  ORDER BY seq LIMIT 200 FOR UPDATE SKIP LOCKED`.pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(OutboxRow))), Effect.orDie)
        if (events.length === 0) return 0
        const now = yield* Clock.currentTimeMillis
        const snapshot = startMachine(deliveryMachine, {}).persisted
        const byAgent = new Map<string, ReadonlyArray<{ readonly id: string; readonly events: ReadonlyArray<string>; readonly isActive: boolean }>>()
        for (const event of events) {
          // Only the spec's events are delivered (internal ones such as agent.updated stay in the outbox).
          if (event.agentId === null || !WEBHOOK_EVENTS.some((e) => e === event.eventType)) continue
          const subs = byAgent.get(event.agentId) ?? (yield* subscriptions.byAgent(event.agentId))
          byAgent.set(event.agentId, subs)
          const body = JSON.stringify({ event: event.eventType, timestamp: event.createdAt.toISOString(), data: event.payload })
          for (const sub of subs) {
            if (!sub.isActive || !matches(sub.events, event.eventType)) continue
            yield* deliveries.insert({ subscriptionId: sub.id, eventId: event.id, eventType: event.eventType, body, snapshot, at: new Date(now) })
          }
        }
        yield* sql`UPDATE outbox_events SET dispatched_at = ${new Date(now)} WHERE id IN ${sql.in(events.map((e) => e.id))}`
        return events.length
      })
    ).pipe(Effect.withSpan("Dispatcher.dispatchDue"))

    /** One POST; the outcome as the machine's event (a non-2xx, timeout, refused address or TLS error is a failure). */
    const post = (delivery: DeliveryRow, url: string, secret: string) =>
      Effect.gen(function* () {
        const attempt = delivery.attemptCount + 1
        const started = yield* Clock.currentTimeMillis
        const headers = deliveryHeaders({ secret, subscriptionId: delivery.subscriptionId, deliveryId: delivery.id, eventType: delivery.eventType, attempt, body: delivery.body, at: started })
        const outcome = yield* urlGuard.check(url).pipe(
          Effect.mapError((rejected) => rejected.reason),
          Effect.zipRight(Effect.tryPromise({
            try: async (interrupted) => {
              const response = await request(url, {
                dispatcher: pool.dispatcher,
                method: "POST",
                signal: AbortSignal.any([interrupted, AbortSignal.timeout(ATTEMPT_TIMEOUT_MS)]),
                headersTimeout: ATTEMPT_TIMEOUT_MS,
                bodyTimeout: ATTEMPT_TIMEOUT_MS,
                headers,
                body: delivery.body
              })
              const chunks: Array<Buffer> = []
              let size = 0
              for await (const chunk of response.body) {
                const buffer = Buffer.from(chunk)
                if (size < RESPONSE_EXCERPT_BYTES) chunks.push(buffer.subarray(0, RESPONSE_EXCERPT_BYTES - size))
                size += buffer.length
                if (size >= RESPONSE_EXCERPT_BYTES) break
              }
              return { status: response.statusCode, body: Buffer.concat(chunks).toString("utf8") }
            },
            catch: (error) => (error instanceof Error ? `${error.name}: ${error.message}` : String(error)).slice(0, 500)
          })),
          Effect.either
        )
        const at = yield* Clock.currentTimeMillis
        return { attempt, at, elapsed: Math.max(0, Math.round(at - started)), outcome }
      })

    /** Records one attempt and steps the delivery's machine, in one transaction. */
    const record = (delivery: DeliveryRow, result: Effect.Effect.Success<ReturnType<typeof post>>) =>
      sql.withTransaction(
        Effect.gen(function* () {
          const { attempt, at, elapsed, outcome } = result
          const status = outcome._tag === "Right" ? outcome.right.status : null
          const ok = status !== null && status >= 200 && status < 300
          const error = outcome._tag === "Left" ? outcome.left : ok ? null : `the receiver answered ${status}`
          yield* deliveries.addAttempt({
            deliveryId: delivery.id,
            attemptNumber: attempt,
            responseStatus: status,
            responseBody: outcome._tag === "Right" ? outcome.right.body : null,
            errorMessage: error,
            responseTimeMs: elapsed,
            at: new Date(at)
          })
          yield* host.deliver("webhookDelivery", delivery.id, ok && status !== null
            ? { type: "DELIVERED", at, status }
            : { type: "ATTEMPT_FAILED", at, status, error: error ?? "failed" })
        })
      )

    /** One pass over due deliveries (leased: another process skips them while this one posts). */
    const sendDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const due = yield* deliveries.claimDue(now, LEASE_MS, 20)
      yield* Effect.forEach(due, (delivery) =>
        Effect.gen(function* () {
          const sub = yield* subscriptions.find(delivery.subscriptionId)
          if (Option.isNone(sub) || !sub.value.isActive) return // paused or deleted: it waits (a requeue or re-enable resumes it)
          const result = yield* post(delivery, sub.value.url, secrets.decrypt(sub.value.secretEncrypted))
          yield* record(delivery, result)
        }).pipe(Effect.catchAllCause((cause) => Effect.logError(`webhook delivery ${delivery.id} failed; retried after its lease`, cause))), { concurrency: 8, discard: true })
      return due.length
    }).pipe(Effect.withSpan("Dispatcher.sendDue"))

    /** POST /webhooks/:id/test: one signed `webhook.test` post now, not retried and not recorded as a delivery. */
    const sendTest = (sub: { readonly id: string; readonly agentId: string; readonly url: string; readonly secretEncrypted: string }) =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const body = JSON.stringify({ event: "webhook.test", timestamp: new Date(at).toISOString(), data: { webhookId: sub.id, agentId: sub.agentId, message: "test delivery" } })
        const probe: DeliveryRow = {
          id: `del_test_${at.toString(36)}`,
          subscriptionId: sub.id,
          eventId: "test",
          eventType: "webhook.test",
          body,
          status: "pending",
          machineSnapshot: null,
          attemptCount: 0,
          responseStatus: null,
          requeuedFrom: null,
          deliveredAt: null,
          createdAt: new Date(at)
        }
        const { outcome } = yield* post(probe, sub.url, secrets.decrypt(sub.secretEncrypted))
        if (outcome._tag === "Left") return { success: false, status: 0, message: `the test delivery failed: ${outcome.left}` }
        const ok = outcome.right.status >= 200 && outcome.right.status < 300
        return { success: ok, status: outcome.right.status, message: ok ? "the endpoint answered 2xx" : `the endpoint answered ${outcome.right.status}` }
      })

    return { dispatchDue, sendDue, sendTest } as const
  }),
  dependencies: [WebhooksRepo.Default, DeliveriesRepo.Default, WebhookSecrets.Default, MachineHost.Default, OutboundPool.Default, UrlGuard.Default]
}) {}

/** The worker: dispatches and sends every second, and at once when an event is committed (LISTEN outbox_events). */
export const WebhooksWorkerLive = Layer.scopedDiscard(
  Effect.gen(function* () {
    const dispatcher = yield* Dispatcher
    const pg = yield* PgClient.PgClient
    const wake = yield* Queue.sliding<void>(1)
    yield* pg.listen("outbox_events").pipe(
      Stream.runForEach(() => Queue.offer(wake, undefined)),
      Effect.catchAllCause((cause) => Effect.logWarning("outbox LISTEN stopped; polling only", cause)),
      Effect.forkScoped
    )
    const pass = Effect.zipRight(dispatcher.dispatchDue, dispatcher.sendDue).pipe(Effect.catchAllCause((cause) => Effect.logError("webhook pass failed", cause)))
    yield* pass.pipe(
      Effect.zipRight(Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.seconds(1)))),
      Effect.forever,
      Effect.forkScoped
    )
  })
)

