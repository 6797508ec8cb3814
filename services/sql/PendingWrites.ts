// The writes a unit of work holds back until its next flush (services/sql/UnitOfWork.ts): new rows per table, merged
// updates per row, the last write per key, statements in order, and the tables they change (with what their triggers
// change), taken out as the statements of one batch.
import type { SqlClient, Statement } from "@effect/sql"
import type { Deferred } from "effect"
import type { Guard } from "./Optimistic.js"

/** The tables a trigger changes when a table is written (a new row of ledger_entries moves agents' balances). */
const TRIGGERED: Readonly<Record<string, ReadonlyArray<string>>> = {
  ledger_entries: ["ledger_accounts"]
}

/**
 * Tables whose `insert`ed rows are sent sorted by a column: their triggers lock other rows per inserted row (a ledger
 * entry updates its agent account's balance), so every transaction takes those locks in one global order and two
 * concurrent units touching the same accounts cannot deadlock. (`insert` keeps call order for every other table.)
 */
const LOCK_ORDER: Readonly<Record<string, string>> = {
  ledger_entries: "accountId"
}

const byColumn = (column: string) => (a: Record<string, unknown>, b: Record<string, unknown>) => {
  const x = String(a[column])
  const y = String(b[column])
  return x < y ? -1 : x > y ? 1 : 0
}

interface Update {
  readonly table: string
  readonly id: string
  columns: Record<string, unknown>
}

export class Unit {
  /** Appends and writes, in order. */
  statements: Array<Statement.Fragment> = []
  readonly updates = new Map<string, Update>()
  readonly keyed = new Map<string, Statement.Fragment>()
  /** New rows per table, in insertion order (one multi-row INSERT each). */
  readonly rows = new Map<string, Array<Record<string, unknown>>>()
  /** Tables the pending writes change (with what their triggers change). */
  readonly tables = new Set<string>()
  /** Tables with pending appends or writes (an update or keyed write of them must not be batched with those). */
  readonly touched = new Set<string>()
  /** Sums some writes add to rows, per key, since the last flush (e.g. an agent account's balance; see `pendingSum`). */
  readonly sums = new Map<string, bigint>()
  flushing: Deferred.Deferred<void> | null = null
  closed = false
  /** Statements sent by flushes (diagnostics and tests). */
  flushes = 0
  /**
   * Optimistic (see `optimistic`): no transaction is open; the rows stepped from were read without locks, each with a
   * guard that its single write statement checks, and any other statement gives up the attempt.
   */
  readonly optimistic: boolean
  readonly guards: Array<Guard> = []

  constructor(optimistic = false) {
    this.optimistic = optimistic
  }

  get empty() {
    return this.statements.length === 0 && this.updates.size === 0 && this.keyed.size === 0 && this.rows.size === 0
  }

  note(tables: ReadonlyArray<string>) {
    for (const t of tables) {
      this.tables.add(t)
      for (const derived of TRIGGERED[t] ?? []) this.tables.add(derived)
    }
  }

  /** Takes the pending writes as statements (the unit is empty afterwards). */
  take(sql: SqlClient.SqlClient): ReadonlyArray<Statement.Fragment> {
    const all = [
      ...[...this.rows.entries()].map(([table, rows]) => {
        const column = LOCK_ORDER[table]
        return sql`INSERT INTO ${sql(table)} ${sql.insert(column === undefined ? rows : [...rows].sort(byColumn(column)))}`
      }),
      ...this.statements,
      ...[...this.updates.values()].map((u) => sql`UPDATE ${sql(u.table)} SET ${sql.update(u.columns)} WHERE id = ${u.id}`),
      ...this.keyed.values()
    ]
    this.statements = []
    this.updates.clear()
    this.keyed.clear()
    this.rows.clear()
    this.tables.clear()
    this.touched.clear()
    this.sums.clear()
    return all
  }
}
