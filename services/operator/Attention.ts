// What needs an operator's attention now: every actor that is stuck or failing (attentionQueries.ts, one query per kind),
// ranked by money at stake then age. `counts` is the same facts as numbers per kind, for gauges and alerts.
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Schema } from "effect"
import type { MachineKind } from "../../machines/Host.js"
import { MACHINE_KINDS } from "../../src/domain/Operator.js"
import { rowsOf } from "../sql/Rows.js"
import { ATTENTION_KINDS, type AttentionCounts, attentionCounts, type AttentionKind, attentionQuery, zeros } from "./attentionQueries.js"
import { formatUsdc } from "../../src/domain/Money.js"

export { ATTENTION_KINDS, type AttentionKind } from "./attentionQueries.js"

/** How many items of one kind the page lists at most (the counts are exact). */
const PER_KIND_LIMIT = 200

const AttentionRow = Schema.Struct({
  machine: Schema.NullOr(Schema.String),
  actorId: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  amount: Schema.BigInt,
  since: Schema.DateFromSelf,
  cause: Schema.String,
  lever: Schema.NullOr(Schema.String),
  leverTarget: Schema.NullOr(Schema.String)
})
const attentionRows = rowsOf(AttentionRow)

export interface AttentionItem {
  readonly kind: AttentionKind
  /** The machine kind whose actor this is (null: a webhook subscription or a reconciliation, which are not machines). */
  readonly machine: MachineKind | null
  readonly actorId: string
  readonly agentId: string | null
  /** Micro-USDC at stake (0 when no money waits on it). */
  readonly amount: bigint
  readonly since: Date
  readonly cause: string
  /** The lever that acts on it (a console lever name, or resolve_dispute for the operator API) and what it targets. */
  readonly lever: string | null
  readonly leverTarget: string | null
}


const isMachineKind = (value: string | null): value is MachineKind => MACHINE_KINDS.some((k) => k === value)

/** Most money first; equal money, oldest first. */
export const rank = (items: ReadonlyArray<AttentionItem>): ReadonlyArray<AttentionItem> =>
  [...items].sort((a, b) => (a.amount === b.amount ? a.since.getTime() - b.since.getTime() : a.amount > b.amount ? -1 : 1))


/** Pure: the number of items per kind (every kind present, zeros included). */
export const countByKind = (items: ReadonlyArray<AttentionItem>): AttentionCounts => {
  const counts = zeros()
  for (const item of items) counts[item.kind] += 1
  return counts
}

export class Attention extends Effect.Service<Attention>()("operator/Attention", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const ofKind = (kind: AttentionKind, now: Date, limit: number | null) =>
      attentionRows(limit === null ? attentionQuery(sql, kind, now) : sql`SELECT * FROM (${attentionQuery(sql, kind, now)}) q ORDER BY amount::numeric DESC, since LIMIT ${limit}`).pipe(
        Effect.map((rows) =>
          rows.map((r): AttentionItem => ({
            kind,
            machine: isMachineKind(r.machine) ? r.machine : null,
            actorId: r.actorId,
            agentId: r.agentId,
            amount: r.amount,
            since: r.since,
            cause: r.cause,
            lever: r.lever,
            leverTarget: r.leverTarget
          }))
        ),
        Effect.orDie
      )

    /** Every item at `now` (default: the clock's time), ranked. */
    const list = (at?: Date) =>
      Effect.gen(function* () {
        const now = at ?? new Date(yield* Clock.currentTimeMillis)
        const all = yield* Effect.forEach(ATTENTION_KINDS, (kind) => ofKind(kind, now, PER_KIND_LIMIT), { concurrency: 4 })
        return rank(all.flat())
      }).pipe(Effect.withSpan("Attention.list"))

    /** The number of stuck or failing actors per kind at `now`: what the console lists, as the gauges expose it. */
    const counts = (at?: Date) =>
      Effect.gen(function* () {
        const now = at ?? new Date(yield* Clock.currentTimeMillis)
        return yield* attentionCounts(sql, now).pipe(Effect.orDie)
      }).pipe(Effect.withSpan("Attention.counts"))

    /** The operator API's report: the items (amounts as USDC decimals) and the exact counts. */
    const report = Effect.gen(function* () {
      const now = new Date(yield* Clock.currentTimeMillis)
      const [items, exact] = yield* Effect.all([list(now), counts(now)], { concurrency: 2 })
      return {
        generatedAt: now.toISOString(),
        counts: exact,
        items: items.map((i) => ({ ...i, amount: formatUsdc(i.amount), since: i.since.toISOString() }))
      }
    }).pipe(Effect.withSpan("Attention.report"))

    return { list, counts, report } as const
  })
}) {}
