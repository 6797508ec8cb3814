// The unit-of-work transaction (services/sql/UnitOfWork.ts): writes held and sent as one batch, yet every statement of
// the transaction sees them, a row's updates merge, the last write of a key wins, and a failing batch rolls back all.
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as UnitOfWork from "../../services/sql/UnitOfWork.js"
import { TestApp } from "../support/harness.js"

const items = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql<{ id: string; n: number; note: string | null }>`SELECT id, n, note FROM uow_items ORDER BY id`.pipe(Effect.orDie))

const pendingOf = Effect.map(UnitOfWork.current, (u) => Option.map(u, (unit) => ({ empty: unit.empty, updates: unit.updates.size, flushes: unit.flushes })))

layer(TestApp({ BACKGROUND_WORKERS: "false" }))("unit of work", (it) => {
  it.effect("writes wait for the batch, but a statement of the transaction that reads their table sees them", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS uow_items (id text PRIMARY KEY, n int NOT NULL, note text)`
      yield* sql`TRUNCATE uow_items`
      const seen = yield* UnitOfWork.transaction(sql)(
        Effect.gen(function* () {
          yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: "a", n: 1 })}`)
          yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: "b", n: 2 })}`)
          const held = yield* pendingOf
          // A statement unaware of the unit (a join naming the table) flushes the batch first.
          const [count] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM (SELECT id FROM uow_items) x`
          // One that does not name it does not.
          yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: "c", n: 3 })}`)
          yield* sql`SELECT 1`
          return { held, count: count?.n, after: yield* pendingOf }
        })
      )
      expect(seen.held).toEqual(Option.some({ empty: false, updates: 0, flushes: 0 }))
      expect(seen.count).toBe(2)
      expect(seen.after).toEqual(Option.some({ empty: false, updates: 0, flushes: 1 }))
      expect(yield* items).toEqual([{ id: "a", n: 1, note: null }, { id: "b", n: 2, note: null }, { id: "c", n: 3, note: null }])
    }))

  it.effect("rows inserted by several calls into one table take its sequence in call order (one multi-row INSERT per table)", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`CREATE TABLE IF NOT EXISTS uow_seq (seq bigserial PRIMARY KEY, label text NOT NULL)`
      yield* sql`TRUNCATE uow_seq`
      const labels = Array.from({ length: 12 }, (_, i) => `step ${i}`)
      yield* UnitOfWork.transaction(sql)(
        Effect.gen(function* () {
          // Interleaved with another table's rows and a separate statement: separate CTEs would run in no set order.
          for (const label of labels) {
            yield* UnitOfWork.insert(sql, "uow_seq", [{ label }])
            yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: `seq-${label}`, n: 0 })}`)
          }
          expect(yield* pendingOf).toEqual(Option.some({ empty: false, updates: 0, flushes: 0 }))
        })
      )
      const rows = yield* sql<{ label: string }>`SELECT label FROM uow_seq ORDER BY seq`
      expect(rows.map((r) => r.label)).toEqual(labels)
      yield* sql`DELETE FROM uow_items WHERE id LIKE 'seq-%'`
    }))

  it.effect("updates of one row merge into one; an update of a row appended in the same batch goes after it", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`TRUNCATE uow_items`
      yield* sql`INSERT INTO uow_items ${sql.insert({ id: "a", n: 1 })}`
      const seen = yield* UnitOfWork.transaction(sql)(
        Effect.gen(function* () {
          yield* UnitOfWork.update(sql, "uow_items", "a", { n: 2 })
          yield* UnitOfWork.update(sql, "uow_items", "a", { note: "merged" })
          yield* UnitOfWork.update(sql, "uow_items", "a", { n: 3 })
          const merged = yield* pendingOf
          yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: "b", n: 1 })}`)
          yield* UnitOfWork.update(sql, "uow_items", "b", { note: "after its insert" })
          return { merged, after: yield* pendingOf }
        })
      )
      expect(seen.merged).toEqual(Option.some({ empty: false, updates: 1, flushes: 0 }))
      expect(seen.after).toEqual(Option.some({ empty: false, updates: 1, flushes: 1 }))
      expect(yield* items).toEqual([{ id: "a", n: 3, note: "merged" }, { id: "b", n: 1, note: "after its insert" }])
    }))

  it.effect("the last write of a key wins: an upsert then a delete leaves nothing, a delete then an upsert leaves the row", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`TRUNCATE uow_items`
      yield* sql`INSERT INTO uow_items ${sql.insert({ id: "old", n: 1 })}`
      const upsert = (id: string, n: number) =>
        sql`INSERT INTO uow_items ${sql.insert({ id, n })} ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n`
      const remove = (id: string) => sql`DELETE FROM uow_items WHERE id = ${id}`
      yield* UnitOfWork.transaction(sql)(
        Effect.gen(function* () {
          yield* UnitOfWork.keyed(sql, "uow_items", "old", upsert("old", 2))
          yield* UnitOfWork.keyed(sql, "uow_items", "old", remove("old"))
          yield* UnitOfWork.keyed(sql, "uow_items", "new", remove("new"))
          yield* UnitOfWork.keyed(sql, "uow_items", "new", upsert("new", 5))
          yield* UnitOfWork.keyed(sql, "uow_items", "new", upsert("new", 6))
        })
      )
      expect(yield* items).toEqual([{ id: "new", n: 6, note: null }])
    }))

  it.effect("a batched write that fails at commit rolls back the whole transaction, writes flushed earlier included", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`TRUNCATE uow_items`
      const result = yield* UnitOfWork.transaction(sql)(
        Effect.gen(function* () {
          yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: "a", n: 1 })}`)
          yield* sql`SELECT count(*) FROM uow_items`
          yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: "a", n: 2 })}`)
        })
      ).pipe(Effect.either)
      expect(result._tag).toBe("Left")
      expect(yield* items).toEqual([])
    }))

  it.effect("outside a unit every write runs at once", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`TRUNCATE uow_items`
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* UnitOfWork.append(sql, ["uow_items"], sql`INSERT INTO uow_items ${sql.insert({ id: "a", n: 1 })}`)
          yield* UnitOfWork.update(sql, "uow_items", "a", { n: 2 })
          expect(yield* UnitOfWork.current).toEqual(Option.none())
        })
      )
      expect(yield* items).toEqual([{ id: "a", n: 2, note: null }])
    }))
})
