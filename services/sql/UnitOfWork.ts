// A transaction whose writes are gathered and sent as few statements as possible (one batch of data-modifying CTEs,
// services/sql/Batch.ts), at commit or just before a statement that may read what they wrote.
//
// Inside `transaction`, code writes through `append`, `update`, `keyed` and `write` instead of running its statement:
// - `insert`: new rows of a table (no ON CONFLICT): gathered into one multi-row INSERT per table, so the rows of a table
//   take its sequence in the order they were inserted (separate data-modifying CTEs run in no promised order: the
//   history of two steps in one unit would otherwise come out reversed);
// - `append`: INSERTs of new rows (no ON CONFLICT): always batched;
// - `update`: one row's columns by id; several updates of one row merge into one (a statement may not change a row twice);
// - `keyed`: an upsert or delete of one key (a durable timer): the last one per key wins;
// - `write`: anything else (a statement that reads the rows it changes): the pending writes to its tables go first.
// Every other statement run in the transaction (reads, and writes of code that does not know about the unit) first
// flushes the pending writes if its text names one of their tables, or a table their triggers change: read-your-writes
// and statement order hold for code unaware of the unit. What it cannot see: a nested `sql.withTransaction` (savepoints
// bypass statements) must not be used inside a unit, and a table read only through a function or view must be named in
// `tables` of the writes that change it. An error of a batched write surfaces at the flush (as a defect when the flush
// runs before another statement), and the whole transaction rolls back.
import { type SqlClient, type SqlError, Statement } from "@effect/sql"
import { Deferred, Effect, FiberId, FiberRef, Option } from "effect"
import { batch } from "./Batch.js"
import { direct } from "./Direct.js"
import { guarded, isGuardFailure, noteFallback, OptimisticConflict, optimisticCounts } from "./Optimistic.js"
import { Unit } from "./PendingWrites.js"

export type { Unit }

const currentUnit = FiberRef.unsafeMake<Option.Option<Unit>>(Option.none())

const openUnit = (unit: Option.Option<Unit>) => (Option.isSome(unit) && !unit.value.closed ? unit : Option.none<Unit>())

/**
 * `f` of the unit this fiber runs in: one runtime instruction for the look-up (`Effect.flatMap(current, f)` takes
 * four; these run several times per step on the paid call's hot path).
 */
const withUnit = <A, E, R>(f: (unit: Option.Option<Unit>) => Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime((fiber) => f(openUnit(fiber.getFiberRef(currentUnit))))

/** The unit of the transaction this fiber runs in, if it was started by `transaction` and is still open. */
export const current: Effect.Effect<Option.Option<Unit>> = Effect.withFiberRuntime((fiber) => Effect.succeed(openUnit(fiber.getFiberRef(currentUnit))))

/** Sends the pending writes as one statement (waiting for a flush another fiber of the transaction started). */
const flush = (sql: SqlClient.SqlClient, unit: Unit): Effect.Effect<void, SqlError.SqlError> =>
  Effect.suspend(() => {
    // An optimistic unit writes once, at its end (`optimistic`): a write before that would not be atomic with the rest.
    if (unit.optimistic) return Effect.die(new OptimisticConflict({ reason: "a write had to be sent before the end of the unit" }))
    if (unit.flushing !== null) return Effect.zipRight(Deferred.await(unit.flushing), flush(sql, unit))
    if (unit.empty) return Effect.void
    const statements = unit.take(sql)
    const done = Deferred.unsafeMake<void>(FiberId.none)
    unit.flushing = done
    unit.flushes++
    // Its own statement must not wait for itself.
    return direct(batch(sql, statements)).pipe(
      Effect.asVoid,
      Effect.ensuring(Effect.suspend(() => {
        unit.flushing = null
        return Deferred.succeed(done, undefined)
      }))
    )
  })

const mentions = (text: string, tables: ReadonlySet<string>) => {
  for (const t of tables) if (text.includes(t)) return true
  return false
}

/** Before any other statement of the unit's fiber: flush when it may read (or must follow) pending writes. */
const transformer = (sql: SqlClient.SqlClient, unit: Unit): Statement.Statement.Transformer => (self) =>
  Effect.suspend(() => {
    // An optimistic unit runs no statement but its guarded reads (`guardedRead`) and its final write.
    if (unit.optimistic && !unit.closed) return Effect.die(new OptimisticConflict({ reason: "a statement outside the optimistic path" }))
    if (unit.closed || (unit.empty && unit.flushing === null)) return Effect.succeed(self)
    const [text] = self.compile()
    if (unit.flushing === null && !mentions(text, unit.tables)) return Effect.succeed(self)
    return flush(sql, unit).pipe(Effect.orDie, Effect.as(self))
  })

/** Runs `effect` in one transaction whose writes are batched; the pending ones are sent before COMMIT. */
export const transaction = (sql: SqlClient.SqlClient) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  Effect.suspend(() => {
    const unit = new Unit()
    const body = Effect.zipLeft(effect, flush(sql, unit)).pipe(
      Statement.withTransformer(transformer(sql, unit)),
      Effect.locally(currentUnit, Option.some(unit)),
      Effect.ensuring(Effect.sync(() => {
        unit.closed = true
      }))
    )
    return sql.withTransaction(body)
  })

/**
 * Runs `effect` as a transaction without BEGIN/COMMIT when it can: the machine host reads the rows it steps from
 * without locks (each with a guard: the row's locking SELECT must still return the same row), and the pending writes go
 * at the end as ONE statement that first takes the guards' row locks in the order the rows were read (the locking
 * path's order), aborts when one changed (SQLSTATE OG409: nothing written) and otherwise writes everything: atomic on
 * its own, durable at its commit. Anything else (a statement the effect runs itself, a write that must be flushed
 * early, a row without a guard) gives up the attempt before anything was written, as does a failed guard; then
 * `effect` runs again as `transaction` (locks, BEGIN/COMMIT). So `effect` must do nothing but SQL through the unit and
 * pure computation (it may run twice).
 */
export const optimistic = (sql: SqlClient.SqlClient) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError.SqlError, R> =>
  Effect.suspend(() => {
    const unit = new Unit(true)
    const attempt = Effect.zipLeft(effect, Effect.suspend(() => {
      unit.closed = true
      if (unit.empty) return Effect.void
      return guarded(sql, unit.guards, unit.take(sql))
    })).pipe(
      Statement.withTransformer(transformer(sql, unit)),
      Effect.locally(currentUnit, Option.some(unit)),
      Effect.ensuring(Effect.sync(() => {
        unit.closed = true
      }))
    )
    const locking = (reason: string) => Effect.zipRight(Effect.sync(() => noteFallback(reason)), transaction(sql)(effect))
    return attempt.pipe(
      Effect.tap(() => Effect.sync(() => void optimisticCounts.written++)),
      Effect.catchIf(isGuardFailure, () => locking("a guarded row changed")),
      Effect.catchSomeDefect((defect) => (defect instanceof OptimisticConflict ? Option.some(locking(defect.reason)) : Option.none()))
    )
  })

/**
 * Reads a row the unit will step from: in an optimistic unit without a lock, noting the guard its write checks; in a
 * transaction, locking it. `select(lock)` is the row's SELECT, with `FOR UPDATE` when `lock`.
 */
export const guardedRead = (sql: SqlClient.SqlClient, select: (lock: boolean) => Statement.Fragment) =>
  withUnit((unit): Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError> => {
    if (Option.isNone(unit) || !unit.value.optimistic) return sql`${select(true)}`
    const u = unit.value
    // A row with pending writes of this unit would be read stale (an optimistic unit sends nothing before its end).
    if (!u.empty && mentions(sql`${select(false)}`.compile()[0], u.tables)) {
      return Effect.die(new OptimisticConflict({ reason: "a read of a row this unit has pending writes for" }))
    }
    return direct(
      sql<{ rowVersion: string }>`SELECT x.*, md5(row_to_json(x)::text) AS row_version FROM (${select(false)}) x`
    ).pipe(Effect.flatMap((rows) => {
      const row = rows[0]
      // A missing row (or several) is the locking path's to decide.
      if (row === undefined || rows.length > 1) return Effect.die(new OptimisticConflict({ reason: "no single row to guard" }))
      u.guards.push({ select: select(true), version: row.rowVersion })
      return Effect.succeed(rows)
    }))
  })

/** Runs `fragments` now (as one batch), or in the unit's next batch: `tables` they change; `reads` when they read rows of those. */
const enqueue = (sql: SqlClient.SqlClient, fragments: ReadonlyArray<Statement.Fragment>, tables: ReadonlyArray<string>, reads: boolean) =>
  withUnit((unit) => {
    if (Option.isNone(unit)) return Effect.asVoid(batch(sql, fragments))
    const u = unit.value
    const conflicts = reads && tables.some((t) => u.tables.has(t))
    const add = Effect.sync(() => {
      u.statements.push(...fragments)
      u.note(tables)
      for (const t of tables) u.touched.add(t)
    })
    return conflicts ? Effect.zipRight(flush(sql, u), add) : add
  })

/**
 * INSERTs of new rows (no ON CONFLICT, no reads) into `tables`: batched with anything. Outside a unit they run at once
 * as one statement. A data-modifying WITH may not be nested: pass its statements, not a `batch` of them.
 */
export const append = (sql: SqlClient.SqlClient, tables: ReadonlyArray<string>, ...fragments: ReadonlyArray<Statement.Fragment>) =>
  enqueue(sql, fragments, tables, false)

/**
 * New rows of some tables (per table all with the same columns; no ON CONFLICT, no reads): one multi-row INSERT per
 * table in the next batch, in the order given across calls (or `LOCK_ORDER`). Outside a unit: at once, one statement.
 */
export const inserts = (sql: SqlClient.SqlClient, groups: ReadonlyArray<readonly [table: string, rows: ReadonlyArray<Record<string, unknown>>]>) =>
  withUnit((unit) => {
    const nonEmpty = groups.filter(([, rows]) => rows.length > 0)
    if (Option.isNone(unit)) return Effect.asVoid(batch(sql, nonEmpty.map(([table, rows]) => sql`INSERT INTO ${sql(table)} ${sql.insert(rows)}`)))
    const u = unit.value
    return Effect.sync(() => {
      for (const [table, rows] of nonEmpty) {
        const pending = u.rows.get(table)
        if (pending === undefined) u.rows.set(table, [...rows])
        else pending.push(...rows)
        u.note([table])
        u.touched.add(table)
      }
    })
  })

/** New rows of one table (see `inserts`). */
export const insert = (sql: SqlClient.SqlClient, table: string, rows: ReadonlyArray<Record<string, unknown>>) => inserts(sql, [[table, rows]])

/** A statement that reads the rows it changes (UPDATE, DELETE, upsert) of `tables`: after the pending writes to them. */
export const write = (sql: SqlClient.SqlClient, tables: ReadonlyArray<string>, fragment: Statement.Fragment) => enqueue(sql, [fragment], tables, true)

/** Sets some columns of the row `id` of `table` (merged with the unit's other updates of that row). */
export const update = (sql: SqlClient.SqlClient, table: string, id: string, columns: Record<string, unknown>) =>
  withUnit((unit) => {
    if (Option.isNone(unit)) return Effect.asVoid(sql`UPDATE ${sql(table)} SET ${sql.update(columns)} WHERE id = ${id}`)
    const u = unit.value
    const add = Effect.sync(() => {
      const key = `${table}\u0000${id}`
      const pending = u.updates.get(key)
      if (pending === undefined) u.updates.set(key, { table, id, columns: { ...columns } })
      else pending.columns = { ...pending.columns, ...columns }
      u.note([table])
    })
    return u.touched.has(table) ? Effect.zipRight(flush(sql, u), add) : add
  })

/** The write that decides `key` of `table` (an upsert or a delete of one row); a later one for the same key replaces it. */
export const keyed = (sql: SqlClient.SqlClient, table: string, key: string, fragment: Statement.Fragment) =>
  withUnit((unit) => {
    if (Option.isNone(unit)) return Effect.asVoid(sql`${fragment}`)
    const u = unit.value
    const add = Effect.sync(() => {
      u.keyed.delete(key)
      u.keyed.set(key, fragment)
      u.note([table])
    })
    return u.touched.has(table) ? Effect.zipRight(flush(sql, u), add) : add
  })

/** Adds to a sum kept per key until the next flush (what pending writes add to a row a later batched write reads). */
export const addPending = (key: string, amount: bigint) =>
  withUnit((unit) => {
    if (Option.isSome(unit)) unit.value.sums.set(key, (unit.value.sums.get(key) ?? 0n) + amount)
    return Effect.void
  })

/** What pending writes add to `key` (0 outside a unit, or once they were flushed). */
export const pendingSum = (key: string) => withUnit((u) => Effect.succeed(Option.isSome(u) ? u.value.sums.get(key) ?? 0n : 0n))
