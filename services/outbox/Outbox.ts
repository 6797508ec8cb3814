// The event outbox: every domain event is written in the same transaction as the change that caused it.
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { newId } from "../../src/domain/Ids.js"

export type EventType =
  | "agent.registered"
  | "agent.updated"
  | "agent.deactivated"
  | "agent.status_changed"
  | "payment.received"
  | "execution.completed"
  | "execution.failed"
  | "execution.refunded"
  | "escrow.released"
  | "escrow.disputed"
  | "dispute.opened"
  | "dispute.resolved"
  | "withdrawal.requested"
  | "withdrawal.completed"
  | "withdrawal.failed"
  | "chain.started"
  | "chain.child_spawned"
  | "chain.completed"
  | "chain.partial_failure"
  | "chain.budget_warning"
  | "chain.depth_limit"

export class Outbox extends Effect.Service<Outbox>()("Outbox", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    /** Appends an event; call inside the transaction of its cause. Payload values must be JSON (amounts as decimal strings). */
    const emitStatement = (eventType: EventType, agentId: string | null, payload: Record<string, unknown>) =>
      sql`INSERT INTO outbox_events ${sql.insert({
        id: newId("evt"),
        eventType,
        agentId,
        payload: JSON.stringify(payload)
      })}`
    const emit = (eventType: EventType, agentId: string | null, payload: Record<string, unknown>) =>
      emitStatement(eventType, agentId, payload).pipe(Effect.asVoid, Effect.withSpan("Outbox.emit", { attributes: { eventType } }))
    return { emit, emitStatement } as const
  })
}) {}
