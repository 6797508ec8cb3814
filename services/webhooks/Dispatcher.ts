// The outbox dispatcher: each committed event becomes one delivery per matching active subscription (claimed with SKIP
// LOCKED, so several processes share the work); the sender (Sender.ts) posts them with the execution callbacks.
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Layer, Queue, Schema, Stream } from "effect"
import { startMachine } from "../../machines/step.js"
import { deliveryMachine } from "../../machines/webhookDelivery.js"
import { dispatchedStatement } from "../outbox/Outbox.js"
import { DeliveriesRepo } from "./DeliveriesRepo.js"
import { matches, WEBHOOK_EVENTS } from "./events.js"
import { WebhooksRepo } from "./Repo.js"
import { SEND_BATCH, Sender } from "./Sender.js"
import { withSpan } from "../../layers/observability/span.js"

const OutboxRow = Schema.Struct({ id: Schema.String, eventType: Schema.String, agentId: Schema.NullOr(Schema.String), payload: Schema.Unknown, createdAt: Schema.DateFromSelf })

export class Dispatcher extends Effect.Service<Dispatcher>()("webhooks/Dispatcher", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const subscriptions = yield* WebhooksRepo
    const deliveries = yield* DeliveriesRepo
    const sender = yield* Sender

    /** One pass: up to 200 undispatched events become deliveries and are marked dispatched, in one transaction. */
    const dispatchDue = sql.withTransaction(
      Effect.gen(function* () {
        const events = yield* sql`SELECT id, event_type, agent_id, payload, created_at FROM outbox_events WHERE dispatched_at IS NULL
                                  ORDER BY seq LIMIT 200 FOR UPDATE SKIP LOCKED`.pipe(Effect.flatMap(Schema.decodeUnknown(Schema.Array(OutboxRow))), Effect.orDie)
        if (events.length === 0) return 0
        const now = yield* Clock.currentTimeMillis
        const snapshot = startMachine(deliveryMachine, {}).persisted
        const byAgent = new Map<string, ReadonlyArray<{ readonly id: string; readonly events: ReadonlyArray<string>; readonly isActive: boolean }>>()
        const created: Array<Parameters<typeof deliveries.insertAll>[0][number]> = []
        for (const event of events) {
          // Only the spec's events are delivered (internal ones such as agent.updated stay in the outbox).
          if (event.agentId === null || !WEBHOOK_EVENTS.some((e) => e === event.eventType)) continue
          const subs = byAgent.get(event.agentId) ?? (yield* subscriptions.byAgent(event.agentId))
          byAgent.set(event.agentId, subs)
          const body = JSON.stringify({ event: event.eventType, timestamp: event.createdAt.toISOString(), data: event.payload })
          for (const sub of subs) {
            if (!sub.isActive || !matches(sub.events, event.eventType)) continue
            created.push({ subscriptionId: sub.id, eventId: event.id, eventType: event.eventType, body, snapshot, at: new Date(now) })
          }
        }
        // One statement for all of them (one round trip per pass, not one per delivery: under load the inserts were
        // what kept the sender from keeping up).
        yield* deliveries.insertAll(created)
        yield* dispatchedStatement(sql, events.map((e) => e.id), now)
        return events.length
      })
    ).pipe(withSpan("Dispatcher.dispatchDue"))

    return { dispatchDue, sendDue: sender.sendDue, sendTest: sender.sendTest } as const
  }),
  dependencies: [WebhooksRepo.Default, DeliveriesRepo.Default, Sender.Default]
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
    // A full claim means more is due: send again at once (up to 10 batches) before waiting for the next event or tick.
    const sendBacklog = dispatcher.sendDue.pipe(Effect.repeat({ while: (claimed) => claimed >= SEND_BATCH, times: 9 }))
    const pass = Effect.zipRight(dispatcher.dispatchDue, sendBacklog).pipe(Effect.catchAllCause((cause) => Effect.logError("webhook pass failed", cause)))
    yield* pass.pipe(
      Effect.zipRight(Effect.raceFirst(Queue.take(wake), Effect.sleep(Duration.seconds(1)))),
      Effect.forever,
      Effect.forkScoped
    )
  })
)
