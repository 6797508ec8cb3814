// The event outbox: every domain event is written in the same transaction as the change that caused it.
import { SqlClient, type Statement } from "@effect/sql"
import { Effect } from "effect"
import { newId } from "../../src/domain/Ids.js"
import * as UnitOfWork from "../sql/UnitOfWork.js"

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
  | "agent.usage_missing"
  // Recorded for the operator only (no agent owns a channel; webhooks are per agent).
  | "channel.opened"
  | "channel.withdrawing"
  | "channel.drained"
  | "channel.closed"
  | "channel.failed"

export class Outbox extends Effect.Service<Outbox>()("Outbox", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    /** Appends an event; call inside the transaction of its cause. Payload values must be JSON (amounts as decimal strings). */
    const eventRow = (eventType: EventType, agentId: string | null, payload: Record<string, unknown>) => ({
      id: newId("evt"),
      eventType,
      agentId,
      payload: JSON.stringify(payload)
    })
    const emitStatement = (eventType: EventType, agentId: string | null, payload: Record<string, unknown>) =>
      sql`INSERT INTO outbox_events ${sql.insert(eventRow(eventType, agentId, payload))}`
    /** Appends an event in the caller's transaction (batched with its other writes in a unit of work). */
    const emit = (eventType: EventType, agentId: string | null, payload: Record<string, unknown>) =>
      UnitOfWork.insert(sql, "outbox_events", [eventRow(eventType, agentId, payload)])
    /** An event some of whose payload values are SQL expressions, evaluated in its own statement (batched like `emit`). */
    const emitComputed = (
      eventType: EventType,
      agentId: string | null,
      payload: Record<string, unknown>,
      computed: ReadonlyArray<readonly [string, Statement.Fragment]>
    ) =>
      UnitOfWork.append(sql, ["outbox_events"], sql`
        INSERT INTO outbox_events (id, event_type, agent_id, payload)
        SELECT ${newId("evt")}::text, ${eventType}::text, ${agentId}::uuid,
               ${JSON.stringify(payload)}::jsonb || jsonb_build_object(${sql.join(", ", false)(computed.flatMap(([key, value]) => [sql`${key}::text`, value]))})`)
    return { emit, emitComputed, emitStatement } as const
  })
}) {}

/** The dispatcher handed these events to their subscriptions (services/webhooks/Dispatcher.ts). */
export const dispatchedStatement = (sql: SqlClient.SqlClient, ids: ReadonlyArray<string>, at: number) =>
  sql`UPDATE outbox_events SET dispatched_at = ${new Date(at)} WHERE id IN ${sql.in(ids)}`
