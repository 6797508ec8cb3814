// A statement run on its connection without @effect/sql's per-statement wrapping (issue 29): the `sql.execute` span
// (made even with tracing off), the statement transformer's fiber-ref look-up and the `withTransformerDisabled` region
// around it, ~100 fiber-runtime instructions per statement. For the unit of work's own statements only (its batched
// writes, guarded reads and guarded write), which run with the transformer disabled anyway. The connection is the one
// the statement would use (the transaction's inside `withTransaction`, the pool's otherwise), the row transform and
// the errors (SqlError with the driver's cause) are the statement's own. Without the statement internals this expects
// (another @effect/sql version), or while tracing is on, it runs the statement the ordinary way.
import { type SqlConnection, type SqlError, Statement } from "@effect/sql"
import { Effect } from "effect"
import { spansEnabled } from "../../layers/observability/span.js"

type Rows = <A extends object>(rows: ReadonlyArray<A>) => ReadonlyArray<A>

interface Internals {
  readonly acquirer: SqlConnection.Connection.Acquirer
  readonly transformRows: Rows | undefined
}

const hasInternals = <A>(statement: Statement.Statement<A>): statement is Statement.Statement<A> & Internals =>
  "acquirer" in statement && Effect.isEffect(statement.acquirer) && "transformRows" in statement &&
  (statement.transformRows === undefined || typeof statement.transformRows === "function")

/** Runs `statement` (with the statement transformer disabled) on its connection. */
export const direct = <A>(statement: Statement.Statement<A>): Effect.Effect<ReadonlyArray<A>, SqlError.SqlError> => {
  // While tracing is on, the ordinary way, so that every statement keeps its `sql.execute` span.
  if (spansEnabled() || !hasInternals(statement)) return Statement.withTransformerDisabled(statement)
  return Effect.scoped(Effect.flatMap(statement.acquirer, (connection) => {
    const [text, params] = statement.compile()
    return connection.execute(text, params, statement.transformRows)
  }))
}
