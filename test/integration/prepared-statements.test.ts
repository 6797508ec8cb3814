// Named prepared statements (layers/pgPrepared.ts): a statement with parameters that repeats is prepared once per
// connection and answers the same; a one-off text is not named; a failing prepared statement fails as before.
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Either } from "effect"
import { namedStatements } from "../../layers/pgPrepared.js"
import { TestApp } from "../support/harness.js"

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("prepared statements", (it) => {
  it.effect("a repeated statement runs prepared on its connection, with the same answers", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS prepared_items (id int PRIMARY KEY, note text NOT NULL)`
      const seen = yield* sql.withTransaction(
        Effect.gen(function* () {
          const answers: Array<unknown> = []
          for (let i = 1; i <= 4; i++) {
            yield* sql`INSERT INTO prepared_items (id, note) VALUES (${i}, ${`n${i}`})`
            answers.push(yield* sql<{ note: string }>`SELECT note FROM prepared_items WHERE id = ${i} AND note <> ${"-- a marker --"}`)
          }
          const prepared = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE ${"%prepared_items%"}`
          const duplicate = yield* Effect.either(sql`INSERT INTO prepared_items (id, note) VALUES (${1}, ${"again"})`)
          return { answers, prepared: prepared[0]?.n, duplicate }
        })
      )
      // A prepared statement that fails (a duplicate key) fails as an unnamed one would; the aborted transaction's
      // COMMIT rolls everything back.
      expect(Either.isLeft(seen.duplicate)).toBe(true)
      expect(seen.answers).toEqual([[{ note: "n1" }], [{ note: "n2" }], [{ note: "n3" }], [{ note: "n4" }]])
      const ok = yield* sql.withTransaction(
        Effect.gen(function* () {
          const answers: Array<unknown> = []
          for (let i = 1; i <= 3; i++) {
            yield* sql`INSERT INTO prepared_items (id, note) VALUES (${i}, ${`n${i}`})`
            answers.push(yield* sql<{ note: string }>`SELECT note FROM prepared_items WHERE id = ${i} AND note <> ${"-- a marker --"}`)
          }
          const prepared = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE ${"%prepared_items%"}`
          return { answers, prepared: prepared[0]?.n }
        })
      )
      expect(ok.answers).toEqual([[{ note: "n1" }], [{ note: "n2" }], [{ note: "n3" }]])
      // Both statements repeat (the INSERT and the SELECT): named and prepared on this connection.
      expect(ok.prepared).toBe(2)
      expect(namedStatements()).toBeGreaterThan(0)
      const rows = yield* sql<{ id: number }>`SELECT id FROM prepared_items ORDER BY id`
      expect(rows).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }])
    }))
})
