// Executions in PostgreSQL: the row schema (with its payment, escrow and refund), loads and idempotency look-ups.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"

export const ExecutionRow = Schema.Struct({
  id: Schema.String,
  transactionId: Schema.String,
  escrowId: Schema.String,
  paymentId: Schema.String,
  payer: Schema.String,
  agentId: Schema.String,
  capabilityId: Schema.String,
  input: Schema.Unknown,
  requestHash: Schema.String,
  idempotencyKey: Schema.NullOr(Schema.String),
  mode: Schema.Literal("sync", "async", "callback"),
  callbackUrl: Schema.NullOr(Schema.String),
  status: Schema.Literal("pending", "completed", "failed", "timeout", "refunded"),
  state: Schema.String,
  machineSnapshot: Schema.Unknown,
  output: Schema.NullOr(Schema.Unknown),
  error: Schema.NullOr(Schema.String),
  errorKind: Schema.NullOr(Schema.String),
  executionTimeMs: Schema.NullOr(Schema.Number),
  attempts: Schema.Number,
  price: Schema.BigInt,
  platformFee: Schema.BigInt,
  agentFee: Schema.BigInt,
  platformCut: Schema.BigInt,
  agentEarnings: Schema.BigInt,
  depth: Schema.Number,
  chainId: Schema.NullOr(Schema.String),
  parentExecutionId: Schema.NullOr(Schema.String),
  retryUntil: Schema.NullOr(Schema.DateFromSelf),
  createdAt: Schema.DateFromSelf,
  completedAt: Schema.NullOr(Schema.DateFromSelf),
  settlementState: Schema.Literal("reserved", "retrying", "settled", "failed"),
  settlementTxHash: Schema.NullOr(Schema.String),
  headerSha256: Schema.String,
  escrowStatus: Schema.String,
  refundStatus: Schema.NullOr(Schema.String),
  refundTxHash: Schema.NullOr(Schema.String),
  /** The agent's status now (a suspended agent's money is frozen: a fact its execution machine reads at every step). */
  agentStatus: Schema.String
})
export type ExecutionRow = typeof ExecutionRow.Type
export type EscrowStatus = "released" | "refunding" | "refunded" | "void" | "disputed" | "returned"
const decodeRow = Schema.decodeUnknown(ExecutionRow)

export class ExecutionsRepo extends Effect.Service<ExecutionsRepo>()("executions/ExecutionsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const select = (id: string, lock: boolean) =>
      sql`
        SELECT e.*, p.status AS settlement_state, p.tx_hash AS settlement_tx_hash, p.header_sha256,
               s.status AS escrow_status, r.status AS refund_status, r.tx_hash AS refund_tx_hash, a.status AS agent_status
        FROM executions e
        JOIN payments p ON p.id = e.payment_id
        JOIN agents a ON a.id = e.agent_id
        JOIN escrows s ON s.execution_id = e.id
        LEFT JOIN refunds r ON r.execution_id = e.id
        WHERE e.id = ${id} ${lock ? sql`FOR UPDATE OF e` : sql``}`.pipe(
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.succeed(Option.none()) : Effect.map(decodeRow(rows[0]), Option.some))),
        Effect.catchTag("ParseError", Effect.die)
      )

    /** The execution with its payment, escrow and refund. */
    const find = (id: string) => select(id, false)
    /** The same, locking the execution row in the caller's transaction. */
    const lock = (id: string) => select(id, true)

    const findIdempotent = (payer: string, key: string) =>
      sql<{ id: string; requestHash: string }>`SELECT id, request_hash FROM executions WHERE payer = ${payer} AND idempotency_key = ${key}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    /** The escrow's status after a movement. */
    const setEscrow = (escrowId: string, status: EscrowStatus, at: number) =>
      sql`UPDATE escrows SET status = ${status}, updated_at = ${new Date(at)}${status === "released" ? sql`, released_at = ${new Date(at)}` : sql``}
          WHERE id = ${escrowId}`.pipe(Effect.asVoid)

    const setReleaseAt = (escrowId: string, at: number) => sql`UPDATE escrows SET release_at = ${new Date(at)} WHERE id = ${escrowId}`.pipe(Effect.asVoid)

    return { find, lock, findIdempotent, setEscrow, setReleaseAt } as const
  })
}) {}
