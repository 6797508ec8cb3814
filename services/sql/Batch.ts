// Several writes as one SQL statement (data-modifying CTEs): one round trip, atomic on its own, FK checks at its end.
import type { SqlClient, Statement } from "@effect/sql"

/** `WITH w0 AS (s0), w1 AS (s1), … sN`: every statement runs; they see the same snapshot, so none may read another's rows. */
export const batch = (sql: SqlClient.SqlClient, statements: ReadonlyArray<Statement.Fragment>): Statement.Statement<unknown> => {
  const last = statements[statements.length - 1]
  if (last === undefined) return sql`SELECT 1`
  if (statements.length === 1) return sql`${last}`
  const ctes = statements.slice(0, -1).map((statement, i) => sql`${sql.literal(`w${i}`)} AS (${statement})`)
  return sql`WITH ${sql.join(", ", false)(ctes)} ${last}`
}
