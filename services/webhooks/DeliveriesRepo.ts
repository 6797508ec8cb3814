// Webhook deliveries in PostgreSQL: rows with their machine snapshot, attempts, dead letters, the due-delivery lease.
// A delivery's target is a subscription or an execution's callback URL (services/webhooks/Targets.ts signs each).
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { rowsOf } from "../sql/Rows.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"

export const DeliveryRow = Schema.Struct({
  id: Schema.String,
  target: Schema.Literal("subscription", "callback"),
  /** Set for a subscription's delivery. */
  subscriptionId: Schema.NullOr(Schema.String),
  /** Set for an execution's callback, with the URL it posts to. */
  executionId: Schema.NullOr(Schema.String),
  url: Schema.NullOr(Schema.String),
  eventId: Schema.String,
  eventType: Schema.String,
  body: Schema.String,
  status: Schema.Literal("pending", "delivered", "dead", "superseded"),
  machineSnapshot: Schema.Unknown,
  attemptCount: Schema.Number,
  responseStatus: Schema.NullOr(Schema.Number),
  nextAttemptAt: Schema.DateFromSelf,
  requeuedFrom: Schema.NullOr(Schema.String),
  deliveredAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf
})
export type DeliveryRow = typeof DeliveryRow.Type

/** A subscription's delivery as its owner lists it (never superseded: only callbacks are). */
export const SubscriptionDeliveryRow = Schema.Struct({ ...DeliveryRow.fields, status: Schema.Literal("pending", "delivered", "dead") })

export const AttemptRow = Schema.Struct({
  id: Schema.String,
  attemptNumber: Schema.Number,
  responseStatus: Schema.NullOr(Schema.Number),
  responseBody: Schema.NullOr(Schema.String),
  errorMessage: Schema.NullOr(Schema.String),
  responseTimeMs: Schema.Number,
  createdAt: Schema.DateFromSelf
})
export const DeadLetterRow = Schema.Struct({
  id: Schema.String,
  deliveryId: Schema.String,
  eventType: Schema.String,
  lastAttemptAt: Schema.DateFromSelf,
  totalAttempts: Schema.Number,
  lastError: Schema.NullOr(Schema.String),
  requeuedAt: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf
})

const deliveries = rowsOf(DeliveryRow)
const subscriptionDeliveries = rowsOf(SubscriptionDeliveryRow)
const attempts = rowsOf(AttemptRow)
const deadLetters = rowsOf(DeadLetterRow)

export interface NewDelivery {
  readonly eventId: string
  readonly eventType: string
  readonly body: string
  readonly snapshot: unknown
  readonly at: Date
}

export interface NewAttempt {
  readonly deliveryId: string
  readonly attemptNumber: number
  readonly responseStatus: number | null
  readonly responseBody: string | null
  readonly errorMessage: string | null
  readonly responseTimeMs: number
  readonly at: Date
}

export class DeliveriesRepo extends Effect.Service<DeliveriesRepo>()("webhooks/DeliveriesRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const find = (id: string) => Effect.map(deliveries(sql`SELECT * FROM webhook_deliveries WHERE id = ${id}`), (r) => Option.fromNullable(r[0]))
    const lock = (id: string) => Effect.map(deliveries(sql`SELECT * FROM webhook_deliveries WHERE id = ${id} FOR UPDATE`), (r) => Option.fromNullable(r[0]))
    /** Several rows locked in one statement, in id order (two transactions locking overlapping sets cannot deadlock). */
    const lockAll = (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed(new Map<string, DeliveryRow>())
        : Effect.map(
          deliveries(sql`SELECT * FROM webhook_deliveries WHERE id IN ${sql.in(ids)} ORDER BY id FOR UPDATE`),
          (rows) => new Map(rows.map((r) => [r.id, r]))
        )

    const row = (id: string, d: NewDelivery) => ({
      id,
      eventId: d.eventId,
      eventType: d.eventType,
      body: d.body,
      status: "pending",
      machineSnapshot: JSON.stringify(d.snapshot),
      nextAttemptAt: d.at,
      createdAt: d.at
    })

    /** One delivery of an event to a subscription (none when that event already has one there). */
    const insert = (d: NewDelivery & { readonly subscriptionId: string; readonly requeuedFrom?: string }) =>
      Effect.gen(function* () {
        const id = newId("del")
        const inserted = yield* sql`INSERT INTO webhook_deliveries ${sql.insert({
          ...row(id, d),
          target: "subscription",
          subscriptionId: d.subscriptionId,
          requeuedFrom: d.requeuedFrom ?? null
        })} ON CONFLICT DO NOTHING RETURNING id`
        return inserted.length === 0 ? Option.none<string>() : Option.some(id)
      })

    /** Deliveries of events to subscriptions, in one statement (an event that already has one at a subscription is skipped). */
    const insertAll = (ds: ReadonlyArray<NewDelivery & { readonly subscriptionId: string }>) =>
      ds.length === 0
        ? Effect.void
        : sql`INSERT INTO webhook_deliveries ${sql.insert(ds.map((d) => ({
          ...row(newId("del"), d),
          target: "subscription",
          subscriptionId: d.subscriptionId,
          requeuedFrom: null
        })))} ON CONFLICT DO NOTHING`.pipe(Effect.asVoid)

    /** A post of an execution's result to its callback URL (read from the execution, in the caller's transaction). */
    const insertCallback = (executionId: string, d: NewDelivery) =>
      sql`INSERT INTO webhook_deliveries (id, target, execution_id, url, event_id, event_type, body, status, machine_snapshot, next_attempt_at, created_at)
          SELECT ${newId("del")}, 'callback', id, callback_url, ${d.eventId}, ${d.eventType}, ${d.body}, 'pending', ${JSON.stringify(d.snapshot)},
                 ${d.at}, ${d.at}
          FROM executions WHERE id = ${executionId} AND callback_url IS NOT NULL`.pipe(Effect.asVoid)

    /** The newest callback delivery of an execution. */
    const latestCallback = (executionId: string) =>
      Effect.map(
        deliveries(sql`SELECT * FROM webhook_deliveries WHERE execution_id = ${executionId} ORDER BY seq DESC LIMIT 1`),
        (r) => Option.fromNullable(r[0])
      )

    /**
     * Claims due deliveries for `leaseMs` (several processes never post the same attempt at once). A switched-off or
     * deleted subscription's deliveries stay where they are, unclaimed, until it is switched on again: they neither
     * take the pass's slots nor have their due time pushed back.
     */
    const claimDue = (now: number, leaseMs: number, limit: number) =>
      deliveries(sql`
        UPDATE webhook_deliveries SET next_attempt_at = ${new Date(now + leaseMs)}
        WHERE id IN (SELECT d.id FROM webhook_deliveries d
                     WHERE d.status = 'pending' AND d.next_attempt_at <= ${new Date(now)}
                       AND (d.subscription_id IS NULL OR EXISTS (
                         SELECT 1 FROM webhook_subscriptions s WHERE s.id = d.subscription_id AND s.is_active AND s.deleted_at IS NULL))
                     ORDER BY d.next_attempt_at LIMIT ${limit} FOR UPDATE OF d SKIP LOCKED)
        RETURNING *`)

    /** Attempt rows, in one statement (an attempt already logged is kept as it is). */
    const addAttempts = (list: ReadonlyArray<NewAttempt>) =>
      list.length === 0
        ? Effect.void
        : UnitOfWork.write(sql, ["webhook_attempts"], sql`INSERT INTO webhook_attempts ${sql.insert(list.map((a) => ({
          id: newId("att"),
          deliveryId: a.deliveryId,
          attemptNumber: a.attemptNumber,
          responseStatus: a.responseStatus,
          responseBody: a.responseBody,
          errorMessage: a.errorMessage,
          responseTimeMs: a.responseTimeMs,
          createdAt: a.at
        })))} ON CONFLICT (delivery_id, attempt_number) DO NOTHING`)
    const addAttempt = (a: NewAttempt) => addAttempts([a])

    const bySubscription = (subscriptionId: string, limit: number, offset: number) =>
      subscriptionDeliveries(sql`SELECT * FROM webhook_deliveries WHERE subscription_id = ${subscriptionId} ORDER BY created_at DESC, id LIMIT ${limit} OFFSET ${offset}`)
    const attemptsOf = (deliveryId: string) => attempts(sql`SELECT * FROM webhook_attempts WHERE delivery_id = ${deliveryId} ORDER BY attempt_number`)
    const deadLettersOf = (subscriptionId: string, limit: number, offset: number) =>
      Effect.all({
        rows: deadLetters(sql`SELECT * FROM webhook_dead_letters WHERE subscription_id = ${subscriptionId} ORDER BY created_at DESC, id LIMIT ${limit} OFFSET ${offset}`),
        total: Effect.map(sql<{ n: number }>`SELECT COUNT(*)::int AS n FROM webhook_dead_letters WHERE subscription_id = ${subscriptionId}`, (r) => r[0]?.n ?? 0)
      })
    const lockDeadLetter = (id: string) =>
      Effect.map(deadLetters(sql`SELECT * FROM webhook_dead_letters WHERE id = ${id} FOR UPDATE`), (r) => Option.fromNullable(r[0]))

    return { find, lock, lockAll, insert, insertAll, insertCallback, latestCallback, claimDue, addAttempt, addAttempts, bySubscription, attemptsOf, deadLettersOf, lockDeadLetter } as const
  })
}) {}
