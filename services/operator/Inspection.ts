// Machine inspection for operators, one generic reader over every kind's table (Kinds.ts): counts per state, actors in
// a state (newest first, keyset pages), one actor's snapshot with its pending timers and operator actions, and its full
// transition history with the operator action behind each transition it caused.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { MachineKind } from "../../machines/Host.js"
import { rowsOf } from "../sql/Rows.js"
import { OperatorLog } from "./Actions.js"
import { decodeCursor, decodeTimeCursor, invalidCursor, page } from "./cursor.js"
import { MACHINE_KINDS } from "../../src/domain/Operator.js"
import { KINDS } from "./Kinds.js"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

const ActorRow = Schema.Struct({
  id: Schema.String,
  state: Schema.String,
  createdAt: Schema.DateFromSelf,
  createdKey: Schema.String,
  summary: Schema.Record({ key: Schema.String, value: Schema.NullOr(Schema.String) })
})
const actorRows = rowsOf(ActorRow)
const OneActor = Schema.extend(ActorRow, Schema.Struct({ snapshot: Schema.Unknown, workerDue: Schema.NullOr(Schema.DateFromSelf) }))
const oneActor = rowsOf(OneActor)
const CountRow = Schema.Struct({ state: Schema.String, count: Schema.Number })
const counted = rowsOf(CountRow)
const TimerRow = Schema.Struct({ eventType: Schema.String, event: Schema.Unknown, dueAt: Schema.DateFromSelf, attempts: Schema.Number, createdAt: Schema.DateFromSelf })
const timerRows = rowsOf(TimerRow)
const TransitionRow = Schema.Struct({
  id: Schema.String,
  eventType: Schema.String,
  event: Schema.Unknown,
  fromState: Schema.NullOr(Schema.String),
  toState: Schema.String,
  at: Schema.DateFromSelf,
  actionId: Schema.NullOr(Schema.String),
  operator: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  action: Schema.NullOr(Schema.String)
})
const transitions = rowsOf(TransitionRow)

const actorView = (kind: MachineKind, row: typeof ActorRow.Type) => ({ kind, id: row.id, state: row.state, createdAt: row.createdAt.toISOString(), summary: row.summary })

export class Inspection extends Effect.Service<Inspection>()("operator/Inspection", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const log = yield* OperatorLog
    const lit = sql.literal

    /** Ids of uuid-keyed kinds that are not uuids name no actor (and must not reach a uuid comparison). */
    const validId = (kind: MachineKind, id: string) => KINDS[kind].idType === "text" || UUID.test(id)

    const summaryOf = (kind: MachineKind) =>
      lit(`jsonb_build_object(${KINDS[kind].summary.map(([name, expression]) => `'${name}', (${expression})::text`).join(", ")})`)

    const counts = (kind: MachineKind) =>
      Effect.gen(function* () {
        const k = KINDS[kind]
        const rows = yield* counted(sql`SELECT ${lit(k.state)} AS state, count(*)::int AS count FROM ${lit(k.table)} t
                                        WHERE ${lit(k.where ?? "true")} GROUP BY 1`)
        const found = new Map(rows.map((r) => [r.state, r.count]))
        // Every state of the machine, zeros included; a state the rows hold that the machine no longer has comes last.
        const states = [...k.states, ...rows.map((r) => r.state).filter((s) => !k.states.includes(s))]
        const byState = states.map((state) => ({ state, count: found.get(state) ?? 0 }))
        return { kind, total: rows.reduce((sum, r) => sum + r.count, 0), states: byState }
      }).pipe(Effect.orDie, Effect.withSpan("Inspection.counts", { attributes: { kind } }))

    const overview = Effect.forEach(MACHINE_KINDS, counts, { concurrency: 4 })

    const list = (kind: MachineKind, query: { readonly state?: string | undefined; readonly limit: number; readonly cursor?: string | undefined }) =>
      Effect.gen(function* () {
        const k = KINDS[kind]
        const after = yield* decodeTimeCursor(query.cursor)
        const rows = yield* actorRows(sql`
          SELECT t.id::text AS id, ${lit(k.state)} AS state, ${lit(k.created)} AS created_at, ${lit(k.created)}::text AS created_key,
                 ${summaryOf(kind)} AS summary
          FROM ${lit(k.table)} t
          WHERE ${sql.and([
          lit(k.where ?? "true"),
          ...(query.state === undefined ? [] : [sql`${lit(k.state)} = ${query.state}`]),
          ...Option.match(after, { onNone: () => [], onSome: (c) => [sql`(${lit(k.created)}, t.id::text) < (${c.at}::timestamptz, ${c.id})`] })
        ])}
          ORDER BY ${lit(k.created)} DESC, t.id::text DESC LIMIT ${query.limit + 1}`).pipe(Effect.orDie)
        const { items, pagination } = page(rows, query.limit, (r) => [r.createdKey, r.id])
        return { kind, state: query.state ?? null, actors: items.map((r) => actorView(kind, r)), pagination }
      }).pipe(Effect.withSpan("Inspection.list", { attributes: { kind } }))

    /** Pending durable timers (machine_timers) and the row's own due time when a worker is the machine's timer. */
    const timersOf = (kind: MachineKind, id: string, workerDue: Date | null) =>
      Effect.map(
        timerRows(sql`SELECT event_type, event, due_at, attempts, created_at FROM machine_timers
                      WHERE machine = ${kind} AND actor_id = ${id} AND fired_at IS NULL ORDER BY due_at, id`),
        (rows) => [
          ...rows.map((t) => ({ source: "timer" as const, event: t.eventType, dueAt: t.dueAt.toISOString(), attempts: t.attempts, armedAt: t.createdAt.toISOString() })),
          ...(workerDue === null || KINDS[kind].workerTimer === undefined
            ? []
            : [{ source: "worker" as const, event: KINDS[kind].workerTimer.event, dueAt: workerDue.toISOString(), attempts: null, armedAt: null }])
        ]
      )

    const actor = (kind: MachineKind, id: string) =>
      Effect.gen(function* () {
        if (!validId(kind, id)) return Option.none()
        const k = KINDS[kind]
        const [row] = yield* oneActor(sql`
          SELECT t.id::text AS id, ${lit(k.state)} AS state, ${lit(k.created)} AS created_at, ${lit(k.created)}::text AS created_key,
                 ${summaryOf(kind)} AS summary, ${lit(k.snapshot)} AS snapshot, ${lit(k.workerTimer?.due ?? "NULL::timestamptz")} AS worker_due
          FROM ${lit(k.table)} t WHERE t.id = ${id}${lit(k.idType === "uuid" ? "::uuid" : "")} AND ${lit(k.where ?? "true")}`)
        if (row === undefined) return Option.none()
        return Option.some({
          ...actorView(kind, row),
          snapshot: row.snapshot,
          timers: yield* timersOf(kind, id, row.workerDue),
          operatorActions: yield* log.forActor(kind, id)
        })
      }).pipe(Effect.orDie, Effect.withSpan("Inspection.actor", { attributes: { kind } }))

    const exists = (kind: MachineKind, id: string) =>
      validId(kind, id)
        ? Effect.map(
          sql`SELECT 1 FROM ${lit(KINDS[kind].table)} t WHERE t.id = ${id}${lit(KINDS[kind].idType === "uuid" ? "::uuid" : "")} AND ${lit(KINDS[kind].where ?? "true")}`,
          (rows) => rows.length > 0
        ).pipe(Effect.orDie)
        : Effect.succeed(false)

    /** The transitions, oldest first, `limit` per page (cursor: the last transition's id); none when there is no such actor. */
    const history = (kind: MachineKind, id: string, query: { readonly limit: number; readonly cursor?: string | undefined }) =>
      Effect.gen(function* () {
        const after = yield* decodeCursor(query.cursor)
        const afterId = Option.match(after, { onNone: () => "0", onSome: ([, last]) => last })
        if (Option.isSome(after) && (after.value[0] !== "transition" || !/^\d{1,18}$/.test(afterId))) {
          return yield* Effect.fail(invalidCursor())
        }
        if (!(yield* exists(kind, id))) return Option.none()
        const rows = yield* transitions(sql`
          SELECT mt.id::text AS id, mt.event_type, mt.event, mt.from_state, mt.to_state, mt.at,
                 o.id AS action_id, o.operator, o.reason, o.action
          FROM machine_transitions mt LEFT JOIN operator_actions o ON o.transition_id = mt.id
          WHERE mt.machine = ${kind} AND mt.actor_id = ${id} AND mt.id > ${afterId}::bigint
          ORDER BY mt.id LIMIT ${query.limit + 1}`).pipe(Effect.orDie)
        const { items, pagination } = page(rows, query.limit, (r) => ["transition", r.id])
        return Option.some({
          kind,
          id,
          transitions: items.map((t) => ({
            id: t.id,
            event: t.eventType,
            from: t.fromState,
            to: t.toState,
            at: t.at.toISOString(),
            payload: t.event,
            operator: t.actionId === null ? null : { actionId: t.actionId, name: t.operator, action: t.action, reason: t.reason }
          })),
          pagination
        })
      }).pipe(Effect.withSpan("Inspection.history", { attributes: { kind } }))

    return { counts, overview, list, actor, history } as const
  }),
  dependencies: [OperatorLog.Default]
}) {}
