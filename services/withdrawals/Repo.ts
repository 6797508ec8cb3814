// Withdrawals in PostgreSQL: the row (with its machine snapshot), locks, lists and the pending payouts' lease.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { rowsOf } from "../sql/Rows.js"

export const WithdrawalRow = Schema.Struct({
  id: Schema.String,
  agentId: Schema.String,
  amount: Schema.BigInt,
  fee: Schema.BigInt,
  netAmount: Schema.BigInt,
  destinationWallet: Schema.String,
  status: Schema.Literal("pending", "processing", "completed", "failed"),
  machineSnapshot: Schema.Unknown,
  treasuryTxId: Schema.NullOr(Schema.String),
  txHash: Schema.NullOr(Schema.String),
  blockNumber: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  completedAt: Schema.NullOr(Schema.DateFromSelf)
})
export type WithdrawalRow = typeof WithdrawalRow.Type
const rows = rowsOf(WithdrawalRow)

export class WithdrawalsRepo extends Effect.Service<WithdrawalsRepo>()("withdrawals/Repo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const first = (r: ReadonlyArray<WithdrawalRow>) => Option.fromNullable(r[0])

    const find = (id: string) => Effect.map(rows(sql`SELECT *, block_number::text AS block_number FROM withdrawals WHERE id = ${id}`), first)
    const lock = (id: string) =>
      Effect.map(rows(sql`SELECT *, block_number::text AS block_number FROM withdrawals WHERE id = ${id} FOR UPDATE`), first)

    const listByAgent = (agentId: string, limit: number, offset: number) =>
      rows(sql`SELECT *, block_number::text AS block_number FROM withdrawals WHERE agent_id = ${agentId}
               ORDER BY created_at DESC, id LIMIT ${limit} OFFSET ${offset}`)

    /** Count, completed total (gross) and what is still on its way (gross), for the list's summary and the balance. */
    const summary = (agentId: string) =>
      sql<{ totalCount: number; totalWithdrawn: string; pendingAmount: string }>`
        SELECT count(*)::int AS total_count,
               COALESCE(SUM(amount) FILTER (WHERE status = 'completed'), 0)::text AS total_withdrawn,
               COALESCE(SUM(amount) FILTER (WHERE status IN ('pending', 'processing')), 0)::text AS pending_amount
        FROM withdrawals WHERE agent_id = ${agentId}`.pipe(
        Effect.map((r) => ({
          totalCount: r[0]?.totalCount ?? 0,
          totalWithdrawn: BigInt(r[0]?.totalWithdrawn ?? "0"),
          pendingAmount: BigInt(r[0]?.pendingAmount ?? "0")
        }))
      )

    /** Pending payouts whose turn came, leased for `leaseMs` (several processes share the work). */
    const claimDue = (now: number, leaseMs: number, limit: number) =>
      rows(sql`
        UPDATE withdrawals SET next_attempt_at = ${new Date(now + leaseMs)}
        WHERE id IN (SELECT id FROM withdrawals WHERE status = 'pending' AND next_attempt_at <= ${new Date(now)}
                     ORDER BY next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING *, block_number::text AS block_number`)

    return { find, lock, listByAgent, summary, claimDue } as const
  })
}) {}
