// Refunds in PostgreSQL: queued inside the transaction that moves the money to refunds payable (an execution's, or a
// chain's unspent budget).
import { SqlClient } from "@effect/sql"
import { Clock, Effect } from "effect"
import { newId } from "../../src/domain/Ids.js"

export class RefundsRepo extends Effect.Service<RefundsRepo>()("refunds/RefundsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    /** Queues a refund (one per execution); the refund worker sends it through the treasury writer. */
    const create = (input: { readonly executionId: string; readonly paymentId: string; readonly to: string; readonly amount: bigint }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`INSERT INTO refunds ${sql.insert({
          id: newId("rfd"),
          executionId: input.executionId,
          paymentId: input.paymentId,
          toAddress: input.to,
          amount: input.amount.toString(),
          status: "pending",
          nextAttemptAt: new Date(now)
        })} ON CONFLICT (execution_id) DO NOTHING`).pipe(Effect.asVoid)
    /** Queues the refund of a chain's unspent budget (one per chain, whoever asks twice). */
    const createForChain = (input: { readonly chainId: string; readonly paymentId: string; readonly to: string; readonly amount: bigint }) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql`INSERT INTO refunds ${sql.insert({
          id: newId("rfd"),
          chainId: input.chainId,
          paymentId: input.paymentId,
          toAddress: input.to,
          amount: input.amount.toString(),
          status: "pending",
          nextAttemptAt: new Date(now)
        })} ON CONFLICT (chain_id) DO NOTHING`).pipe(Effect.asVoid)
    return { create, createForChain } as const
  })
}) {}
