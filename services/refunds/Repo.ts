// Refunds in PostgreSQL: queued inside the transaction that moves the money to refunds payable (an execution's, or a
// chain's unspent budget).
import { SqlClient } from "@effect/sql"
import { Clock, Effect } from "effect"
import { newId } from "../../src/domain/Ids.js"
import { restoreStatement } from "../limits/statements.js"
import { batch } from "../sql/Batch.js"

export class RefundsRepo extends Effect.Service<RefundsRepo>()("refunds/RefundsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    /**
     * Queues a refund (one per execution); the refund worker sends it through the treasury writer. The refunded amount
     * no longer counts against the payer's spending limits (given back in the same statement, once per execution).
     */
    const create = (input: { readonly executionId: string; readonly paymentId: string; readonly to: string; readonly amount: bigint }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        batch(sql, [sql`INSERT INTO refunds ${sql.insert({
          id: newId("rfd"),
          executionId: input.executionId,
          paymentId: input.paymentId,
          toAddress: input.to,
          amount: input.amount.toString(),
          status: "pending",
          nextAttemptAt: new Date(now)
        })} ON CONFLICT (execution_id) DO NOTHING`,
          restoreStatement(sql, { paymentId: input.paymentId, source: `execution:${input.executionId}`, amount: input.amount })
        ])).pipe(Effect.asVoid)
    /** Queues the refund of a chain's unspent budget (one per chain, whoever asks twice); given back to the limits too. */
    const createForChain = (input: { readonly chainId: string; readonly paymentId: string; readonly to: string; readonly amount: bigint }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        batch(sql, [sql`INSERT INTO refunds ${sql.insert({
          id: newId("rfd"),
          chainId: input.chainId,
          paymentId: input.paymentId,
          toAddress: input.to,
          amount: input.amount.toString(),
          status: "pending",
          nextAttemptAt: new Date(now)
        })} ON CONFLICT (chain_id) DO NOTHING`,
          restoreStatement(sql, { paymentId: input.paymentId, source: `chain:${input.chainId}`, amount: input.amount })
        ])).pipe(Effect.asVoid)
    return { create, createForChain } as const
  })
}) {}

// A refund waiting for its next try (a failed attempt) is tried now; one in flight is the treasury worker's and does not move.

/** An execution's refund, on its machine's REFUND_RETRY. */
export const retryNowStatement = (sql: SqlClient.SqlClient, executionId: string, at: number) =>
  sql`UPDATE refunds SET next_attempt_at = ${new Date(at)} WHERE execution_id = ${executionId} AND status = 'pending'`

/** One refund by id (the operator's lever): the ids it moved. */
export const retryOneNowStatement = (sql: SqlClient.SqlClient, refundId: string, at: number) =>
  sql<{ id: string }>`UPDATE refunds SET next_attempt_at = ${new Date(at)} WHERE id = ${refundId} AND status = 'pending' RETURNING id`
