// The record of operator actions (migration 0017): who pulled which lever on which actor, when, why, and what it did;
// written in the transaction of the lever's effect, read by the actor's view and the audit list.
import { SqlClient, type SqlError } from "@effect/sql"
import { Effect, Option, Redacted, Schema } from "effect"
import { createHash } from "node:crypto"
import { newId } from "../../src/domain/Ids.js"
import { rowsOf } from "../sql/Rows.js"
import { decodeCursor, invalidCursor, page } from "./cursor.js"

/** Who acts: the name the operator gave, and which operator token was used (never the token itself). */
export interface OperatorIdentity {
  readonly name: string
  readonly tokenFingerprint: string
}

/** The first 16 hex digits of the token's SHA-256: tells tokens apart in the record without revealing one. */
export const tokenFingerprint = (token: Redacted.Redacted<string>): string =>
  createHash("sha256").update(Redacted.value(token), "utf8").digest("hex").slice(0, 16)

/** The actor a lever aimed at: a machine kind, or "agent" (an agent's status is not a machine). */
export type ActionSubject = string

export interface ActionInput {
  readonly action: string
  readonly machine: ActionSubject
  readonly actorId: string
  readonly reason: string
  readonly outcome: "applied" | "refused"
  readonly from: string | null
  readonly to: string | null
  readonly transitionId: string | null
  readonly details?: Record<string, unknown>
  readonly at: number
}

export const ActionRow = Schema.Struct({
  id: Schema.String,
  operator: Schema.String,
  tokenFingerprint: Schema.String,
  action: Schema.String,
  machine: Schema.String,
  actorId: Schema.String,
  reason: Schema.String,
  outcome: Schema.Literal("applied", "refused"),
  fromState: Schema.NullOr(Schema.String),
  toState: Schema.NullOr(Schema.String),
  transitionId: Schema.NullOr(Schema.String),
  details: Schema.Unknown,
  at: Schema.DateFromSelf,
  seq: Schema.String
})
export type ActionRow = typeof ActionRow.Type
const actions = rowsOf(ActionRow)

/** What the API shows of an action. */
export const actionView = (row: ActionRow) => ({
  id: row.id,
  operator: row.operator,
  tokenFingerprint: row.tokenFingerprint,
  action: row.action,
  machine: row.machine,
  actorId: row.actorId,
  reason: row.reason,
  outcome: row.outcome,
  from: row.fromState,
  to: row.toState,
  transitionId: row.transitionId,
  details: row.details,
  at: row.at.toISOString()
})
export type ActionView = ReturnType<typeof actionView>

const COLUMNS = "id, operator, token_fingerprint, action, machine, actor_id, reason, outcome, from_state, to_state, transition_id::text AS transition_id, details, at, seq::text AS seq"

export class OperatorLog extends Effect.Service<OperatorLog>()("operator/OperatorLog", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const columns = sql.literal(COLUMNS)

    /** The latest transition of an actor: the one a lever just caused, read under the actor's lock in its transaction. */
    const lastTransition = (machine: string, actorId: string) =>
      Effect.map(
        sql<{ id: string }>`SELECT id::text AS id FROM machine_transitions WHERE machine = ${machine} AND actor_id = ${actorId} ORDER BY machine_transitions.id DESC LIMIT 1`,
        (rows) => rows[0]?.id ?? null
      )

    /** Records an action inside the caller's transaction. */
    const record = (who: OperatorIdentity, input: ActionInput): Effect.Effect<ActionView, SqlError.SqlError> =>
      Effect.gen(function* () {
        const rows = yield* actions(sql`INSERT INTO operator_actions ${sql.insert({
          id: newId("opa"),
          operator: who.name,
          tokenFingerprint: who.tokenFingerprint,
          action: input.action,
          machine: input.machine,
          actorId: input.actorId,
          reason: input.reason,
          outcome: input.outcome,
          fromState: input.from,
          toState: input.to,
          transitionId: input.transitionId,
          details: JSON.stringify(input.details ?? {}),
          at: new Date(input.at)
        })} RETURNING ${columns}`)
        const row = rows[0]
        return row === undefined ? yield* Effect.dieMessage("operator action not recorded") : actionView(row)
      })

    /** Every action on one actor, in the order they happened (a bounded number: levers are pulled by hand). */
    const forActor = (machine: string, actorId: string) =>
      Effect.map(
        actions(sql`SELECT ${columns} FROM operator_actions WHERE machine = ${machine} AND actor_id = ${actorId} ORDER BY operator_actions.seq LIMIT 500`),
        (rows) => rows.map(actionView)
      ).pipe(Effect.orDie)

    /** The audit list, latest first, optionally for one actor. */
    const list = (query: { readonly machine?: string | undefined; readonly actorId?: string | undefined; readonly limit: number; readonly cursor?: string | undefined }) =>
      Effect.gen(function* () {
        const after = yield* decodeCursor(query.cursor)
        if (Option.isSome(after) && (after.value[0] !== "action" || !/^\d{1,18}$/.test(after.value[1]))) return yield* Effect.fail(invalidCursor())
        const rows = yield* actions(sql`SELECT ${columns} FROM operator_actions WHERE ${sql.and([
          ...(query.machine === undefined ? [] : [sql`machine = ${query.machine}`]),
          ...(query.actorId === undefined ? [] : [sql`actor_id = ${query.actorId}`]),
          ...Option.match(after, { onNone: () => [], onSome: ([, seq]) => [sql`seq < ${seq}::bigint`] })
        ])} ORDER BY operator_actions.seq DESC LIMIT ${query.limit + 1}`).pipe(Effect.orDie)
        const { items, pagination } = page(rows, query.limit, (r) => ["action", r.seq])
        return { actions: items.map(actionView), pagination }
      })

    return { record, lastTransition, forActor, list } as const
  })
}) {}
