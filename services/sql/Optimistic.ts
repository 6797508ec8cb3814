// The write of an optimistic unit of work (UnitOfWork.ts `optimistic`): its pending writes as one statement whose main
// query first locks every row the unit stepped from, in the order they were read, and aborts the whole statement
// (optimistic_guard, migrations/0035_one_statement_guards: SQLSTATE OG409) unless each is still the row that was read.
// It runs on its connection directly (Direct.ts): no statement transformer sees it.
import type { SqlClient, SqlError, Statement } from "@effect/sql"
import { Data, Effect } from "effect"
import { direct } from "./Direct.js"

/** A row read without a lock: its locking SELECT, and the md5 of the row as it was read. */
export interface Guard {
  readonly select: Statement.Fragment
  readonly version: string
}

/** The optimistic attempt cannot go on (nothing was written): the unit runs again on the locking path. */
export class OptimisticConflict extends Data.TaggedError("OptimisticConflict")<{ readonly reason: string }> {}

/** How optimistic units ended in this process (diagnostics and tests): written as one statement, or run again locking. */
export const optimisticCounts = { written: 0, fellBack: 0, reasons: new Map<string, number>() }

export const noteFallback = (reason: string) => {
  optimisticCounts.fellBack++
  optimisticCounts.reasons.set(reason, (optimisticCounts.reasons.get(reason) ?? 0) + 1)
}

const GUARD_FAILED = "OG409"

/** A guard found its row changed: the statement wrote nothing. */
export const isGuardFailure = (error: unknown): error is SqlError.SqlError => {
  if (typeof error !== "object" || error === null || !("_tag" in error) || error._tag !== "SqlError") return false
  const cause = "cause" in error ? error.cause : undefined
  return typeof cause === "object" && cause !== null && "code" in cause && cause.code === GUARD_FAILED
}

/** A statement that only reads would not run as a CTE (PostgreSQL runs an unreferenced CTE only when it writes). */
const readsOnly = (fragment: Statement.Fragment) => {
  const first = fragment.segments[0]
  return first !== undefined && first._tag === "Literal" && /^\s*SELECT\b/i.test(first.value)
}

/**
 * `WITH g0 AS (guard 0), …, w0 AS (write 0), … SELECT optimistic_guard(…)`: the main query runs first (PostgreSQL runs
 * the data-modifying CTEs after it), taking the guards' locks one after the other (UNION ALL runs its branches in
 * order); the writes then change rows this statement holds locked, as the locking path's write does.
 */
export const guarded = (
  sql: SqlClient.SqlClient,
  guards: ReadonlyArray<Guard>,
  writes: ReadonlyArray<Statement.Fragment>
): Effect.Effect<unknown, SqlError.SqlError> => {
  if (guards.length === 0 || writes.some(readsOnly)) return Effect.die(new OptimisticConflict({ reason: "no guard, or a write that only reads" }))
  const ctes = [
    ...guards.map((g, i) => sql`${sql.literal(`g${i}`)} AS (SELECT md5(row_to_json(x)::text) AS v FROM (${g.select}) x)`),
    ...writes.map((w, i) => sql`${sql.literal(`w${i}`)} AS (${w})`)
  ]
  const checks = guards.map((g, i) => sql`SELECT v = ${g.version} AS ok FROM ${sql.literal(`g${i}`)}`)
  return direct(sql`WITH ${sql.join(", ", false)(ctes)}
    SELECT optimistic_guard(count(*) FILTER (WHERE ok) = ${guards.length}) FROM (${sql.join(" UNION ALL ", false)(checks)}) s`)
}
