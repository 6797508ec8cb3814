// Decoding query results with a row schema: a row that does not match is a bug in our SQL (a defect), not an answer.
import { Effect, Schema } from "effect"

/** `rowsOf(Row)(sql\`…\`)`: the query's rows decoded as `Row`s. */
export const rowsOf = <A, I>(schema: Schema.Schema<A, I>) => {
  const decode = Schema.decodeUnknown(Schema.Array(schema))
  return <E, R>(query: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<A>, E, R> =>
    Effect.flatMap(query, (rows) => Effect.orDie(decode(rows)))
}
