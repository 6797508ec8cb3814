// Webhook subscriptions in PostgreSQL: rows (secret encrypted), per-agent lists, changes under the row's lock.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { rowsOf } from "../sql/Rows.js"

export const SubscriptionRow = Schema.Struct({
  id: Schema.String,
  agentId: Schema.String,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  isActive: Schema.Boolean,
  secretEncrypted: Schema.String,
  failureCount: Schema.Number,
  lastFailure: Schema.NullOr(Schema.DateFromSelf),
  lastSuccess: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  updatedAt: Schema.DateFromSelf
})
export type SubscriptionRow = typeof SubscriptionRow.Type
const rows = rowsOf(SubscriptionRow)

export class WebhooksRepo extends Effect.Service<WebhooksRepo>()("webhooks/Repo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const find = (id: string) =>
      Effect.map(rows(sql`SELECT * FROM webhook_subscriptions WHERE id = ${id} AND deleted_at IS NULL`), (r) => Option.fromNullable(r[0]))
    /** Several subscriptions in one statement (the deleted ones left out). */
    const findAll = (ids: ReadonlyArray<string>) =>
      ids.length === 0 ? Effect.succeed([]) : rows(sql`SELECT * FROM webhook_subscriptions WHERE id IN ${sql.in(ids)} AND deleted_at IS NULL`)
    const lock = (id: string) =>
      Effect.map(rows(sql`SELECT * FROM webhook_subscriptions WHERE id = ${id} AND deleted_at IS NULL FOR UPDATE`), (r) => Option.fromNullable(r[0]))
    const byAgent = (agentId: string) =>
      rows(sql`SELECT * FROM webhook_subscriptions WHERE agent_id = ${agentId} AND deleted_at IS NULL ORDER BY created_at, id`)
    /** Under the agent row's lock, so two concurrent creations cannot both pass the per-agent limit. */
    const countForAgentLocked = (agentId: string) =>
      Effect.zipRight(
        sql`SELECT 1 FROM agents WHERE id = ${agentId} FOR UPDATE`,
        Effect.map(
          sql<{ n: number }>`SELECT COUNT(*)::int AS n FROM webhook_subscriptions WHERE agent_id = ${agentId} AND deleted_at IS NULL`,
          (r) => r[0]?.n ?? 0
        )
      )
    const insert = (row: { readonly id: string; readonly agentId: string; readonly url: string; readonly events: ReadonlyArray<string>; readonly secretEncrypted: string; readonly at: Date }) =>
      sql`INSERT INTO webhook_subscriptions ${sql.insert({
        id: row.id,
        agentId: row.agentId,
        url: row.url,
        events: JSON.stringify(row.events),
        secretEncrypted: row.secretEncrypted,
        createdAt: row.at,
        updatedAt: row.at
      })}`.pipe(Effect.asVoid)
    const update = (id: string, change: { readonly url?: string | undefined; readonly events?: ReadonlyArray<string> | undefined; readonly isActive?: boolean | undefined; readonly secretEncrypted?: string | undefined }, at: Date) =>
      sql`UPDATE webhook_subscriptions SET ${sql.update({
        ...(change.url === undefined ? {} : { url: change.url }),
        ...(change.events === undefined ? {} : { events: JSON.stringify(change.events) }),
        // Re-enabling a subscription starts its failure count afresh.
        ...(change.isActive === undefined ? {} : { isActive: change.isActive, ...(change.isActive ? { failureCount: 0 } : {}) }),
        ...(change.secretEncrypted === undefined ? {} : { secretEncrypted: change.secretEncrypted }),
        updatedAt: at
      })} WHERE id = ${id}`.pipe(Effect.asVoid)
    const remove = (id: string, at: Date) =>
      sql`UPDATE webhook_subscriptions SET deleted_at = ${at}, is_active = false, updated_at = ${at} WHERE id = ${id}`.pipe(Effect.asVoid)

    return { find, findAll, lock, byAgent, countForAgentLocked, insert, update, remove } as const
  })
}) {}
