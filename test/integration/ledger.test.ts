import { expect, layer } from "@effect/vitest"
import { SqlClient } from "@effect/sql"
import { Cause, Effect, Exit } from "effect"
import { Accounts, Ledger } from "../../services/ledger/Ledger.js"
import { TestApp, TestEnv } from "../support/harness.js"

/** The database's own message behind a failed statement or commit. */
const rootMessage = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause)
  return error instanceof Error && error.cause instanceof Error ? error.cause.message : String(error)
}

layer(TestApp(), { excludeTestServices: true })("double-entry ledger", (it) => {
  it.effect("a balanced transfer commits and moves balances on both sides", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const { sql } = yield* TestEnv
      const before = yield* ledger.balance(Accounts.platformRevenue)
      yield* sql.withTransaction(
        ledger.transfer({ kind: "test", movements: [{ debit: Accounts.treasury, credit: Accounts.platformRevenue, amount: 1_234n }] })
      )
      expect(yield* ledger.balance(Accounts.platformRevenue)).toBe(before - 1_234n)
      expect(yield* sql`SELECT * FROM ledger_unbalanced_transfers`).toEqual([])
    }))

  it.effect("the database refuses an unbalanced transfer at commit, whatever the code does", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const attempt = sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`INSERT INTO ledger_transfers (id, kind) VALUES ('ltr_unbalanced_1', 'test')`
          yield* sql`INSERT INTO ledger_entries (transfer_id, account_id, amount) VALUES
                     ('ltr_unbalanced_1', 'treasury', 500), ('ltr_unbalanced_1', 'platform_revenue', -499)`
        })
      )
      // The deferred check fires at COMMIT (the statements themselves succeed).
      const exit = yield* Effect.exit(attempt)
      expect(Exit.isFailure(exit) && rootMessage(exit.cause)).toMatch(/unbalanced/)
      expect(yield* sql`SELECT 1 FROM ledger_transfers WHERE id = 'ltr_unbalanced_1'`).toHaveLength(0)
    }))

  it.effect("a transfer row without entries is refused at commit", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const exit = yield* Effect.exit(sql.withTransaction(sql`INSERT INTO ledger_transfers (id, kind) VALUES ('ltr_empty_1', 'test')`))
      expect(Exit.isFailure(exit) && rootMessage(exit.cause)).toMatch(/unbalanced/)
    }))

  it.effect("ledger rows cannot be changed or deleted", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const ledger = yield* Ledger
      const id = yield* sql.withTransaction(
        ledger.transfer({ kind: "test", movements: [{ debit: Accounts.treasury, credit: Accounts.platformRevenue, amount: 7n }] })
      )
      const update = yield* Effect.flip(sql`UPDATE ledger_entries SET amount = amount * 2 WHERE transfer_id = ${id}`)
      expect(String(update.cause)).toMatch(/append-only/)
      const remove = yield* Effect.flip(sql`DELETE FROM ledger_transfers WHERE id = ${id}`)
      expect(String(remove.cause)).toMatch(/append-only/)
    }))

  it.effect("the code refuses negative, self-referencing and empty movements before touching the database", () =>
    Effect.gen(function* () {
      const ledger = yield* Ledger
      const bad = [
        [{ debit: Accounts.treasury, credit: Accounts.platformRevenue, amount: -1n }],
        [{ debit: Accounts.treasury, credit: Accounts.treasury, amount: 1n }],
        []
      ]
      for (const movements of bad) {
        const error = yield* Effect.flip(ledger.transfer({ kind: "test", movements }))
        expect(error._tag).toBe("LedgerInvariantError")
      }
    }))

  it.effect("agents' maintained balances equal the sum of their entries", () =>
    Effect.gen(function* () {
      const { sql } = yield* TestEnv
      const ledger = yield* Ledger
      const agentId = crypto.randomUUID()
      yield* sql`INSERT INTO agents ${sql.insert({
        id: agentId,
        wallet: `0x${agentId.replace(/-/g, "").padEnd(40, "0").slice(0, 40)}`,
        name: "Ledger test",
        capabilities: "[]",
        endpoints: JSON.stringify({ execution: "http://127.0.0.1:9/x" }),
        status: "active"
      })}`
      yield* sql.withTransaction(ledger.openAgentAccounts(agentId))
      for (const amount of [8_500n, 1n, 42n]) {
        yield* sql.withTransaction(
          ledger.transfer({ kind: "test", movements: [{ debit: Accounts.escrow, credit: Accounts.agentAvailable(agentId), amount }] })
        )
      }
      expect(yield* ledger.balance(Accounts.agentAvailable(agentId))).toBe(-8_543n)
      const drift = yield* sql`
        SELECT a.id FROM ledger_accounts a
        WHERE a.agent_id IS NOT NULL AND a.balance <> COALESCE((SELECT SUM(amount) FROM ledger_entries e WHERE e.account_id = a.id), 0)`
      expect(drift).toEqual([])
    }))

  it.effect("every transfer in the database sums to zero", () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ transferId: string; total: string }>`
        SELECT transfer_id, SUM(amount)::text AS total FROM ledger_entries GROUP BY transfer_id HAVING SUM(amount) <> 0`
      expect(rows).toEqual([])
    }))
})

