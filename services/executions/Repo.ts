// Executions in PostgreSQL: the row schema (with its payment, escrow and refund), loads and idempotency look-ups.
import { SqlClient } from "@effect/sql"
import { Effect, Option, type ParseResult, Schema } from "effect"
import * as UnitOfWork from "../sql/UnitOfWork.js"

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
  /** The network its payment was made on (payments.network); absent on rows not read from the database. */
  paymentNetwork: Schema.optional(Schema.String),
  headerSha256: Schema.String,
  escrowStatus: Schema.String,
  refundStatus: Schema.NullOr(Schema.String),
  refundTxHash: Schema.NullOr(Schema.String),
  /** The agent's status now (a suspended agent's money is frozen: a fact its execution machine reads at every step). */
  agentStatus: Schema.String,
  /** Metered calls only (metering.ts): what the payment authorised (`price` is the charge once usage is known), the meter and usage. */
  authorized: Schema.optional(Schema.NullOr(Schema.BigInt)),
  meterUnit: Schema.optional(Schema.NullOr(Schema.String)),
  unitPrice: Schema.optional(Schema.NullOr(Schema.BigInt)),
  unitsUsed: Schema.optional(Schema.NullOr(Schema.BigInt)),
  usageCapped: Schema.optional(Schema.NullOr(Schema.Boolean)),
  quote: Schema.optional(Schema.NullOr(Schema.BigInt)),
  remainderTo: Schema.optional(Schema.NullOr(Schema.String)),
  remainderStatus: Schema.optional(Schema.NullOr(Schema.String)),
  remainderTxHash: Schema.optional(Schema.NullOr(Schema.String)),
  /** What paid: the payment row's purpose (`credit` for a call paid from the payer's credit). */
  paymentPurpose: Schema.optional(Schema.NullOr(Schema.String)),
  /** A call paid by a batch-settlement voucher: its channel. */
  paymentChannelId: Schema.optional(Schema.NullOr(Schema.String))
})
export type ExecutionRow = typeof ExecutionRow.Type
/** The row as its machine locks it: with the agent's outstanding debt (null when it owes nothing, as nearly all never do). */
export const LockedExecution = Schema.extend(ExecutionRow, Schema.Struct({ agentDebt: Schema.NullOr(Schema.BigInt) }))
export type LockedExecution = typeof LockedExecution.Type
export type EscrowStatus = "released" | "refunding" | "refunded" | "void" | "disputed" | "returned"
const decodeRow = Schema.decodeUnknown(ExecutionRow)
const decodeLocked = Schema.decodeUnknown(LockedExecution)

export class ExecutionsRepo extends Effect.Service<ExecutionsRepo>()("executions/ExecutionsRepo", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** The execution's row; `locked`: as its machine locks it (with the agent's debt), `forUpdate`: with the lock. */
    const selectStatement = (id: string, locked: boolean, forUpdate: boolean) =>
      sql`
        SELECT e.*, p.status AS settlement_state, p.tx_hash AS settlement_tx_hash, p.network AS payment_network, p.header_sha256, p.purpose AS payment_purpose, p.channel_id AS payment_channel_id,
               s.status AS escrow_status, r.status AS refund_status, r.tx_hash AS refund_tx_hash, a.status AS agent_status,
               m.status AS remainder_status, m.tx_hash AS remainder_tx_hash
               ${locked ? sql`, (SELECT d.balance::text FROM ledger_accounts d WHERE d.id = 'agent:' || e.agent_id || ':debt' AND d.balance > 0) AS agent_debt` : sql``}
        FROM executions e
        JOIN payments p ON p.id = e.payment_id
        JOIN agents a ON a.id = e.agent_id
        JOIN escrows s ON s.execution_id = e.id
        LEFT JOIN refunds r ON r.execution_id = e.id
        LEFT JOIN remainders m ON m.execution_id = e.id
        WHERE e.id = ${id} ${forUpdate ? sql`FOR UPDATE OF e` : sql``}`

    const decoded = <A>(decode: (row: unknown) => Effect.Effect<A, ParseResult.ParseError>) => (rows: ReadonlyArray<unknown>) =>
      (rows[0] === undefined ? Effect.succeed(Option.none<A>()) : Effect.map(decode(rows[0]), Option.some)).pipe(Effect.catchTag("ParseError", Effect.die))

    const select = <A>(id: string, lock: boolean, decode: (row: unknown) => Effect.Effect<A, ParseResult.ParseError>) =>
      Effect.flatMap(selectStatement(id, lock, lock), decoded(decode))

    /** The execution with its payment, escrow and refund. */
    const find = (id: string) => select(id, false, decodeRow)
    /** The same, locking the execution row in the caller's transaction, with the agent's debt (not locked). */
    const lock = (id: string) => select(id, true, decodeLocked)

    const findIdempotent = (payer: string, key: string) =>
      sql<{ id: string; requestHash: string }>`SELECT id, request_hash FROM executions WHERE payer = ${payer} AND idempotency_key = ${key}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]))
      )

    /** The escrow's status after a movement (batched in a unit of work). */
    const setEscrow = (escrowId: string, status: EscrowStatus, at: number) =>
      UnitOfWork.update(sql, "escrows", escrowId, { status, updatedAt: new Date(at), ...(status === "released" ? { releasedAt: new Date(at) } : {}) })

    const setReleaseAt = (escrowId: string, at: number) => UnitOfWork.update(sql, "escrows", escrowId, { releaseAt: new Date(at) })

    /** The sha256 of the credential that paid for a chain (its root payment): the chain's payer reads every call in it. */
    const chainPaymentSha256 = (chainId: string) =>
      sql<{ headerSha256: string }>`
        SELECT p.header_sha256 FROM chains c JOIN payments p ON p.id = c.payment_id WHERE c.id = ${chainId}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.headerSha256))
      )

    /** The machine's row for an optimistic unit of work (services/sql/UnitOfWork.ts `guardedRead`). */
    const guarded = {
      select: (id: string, lock: boolean) => selectStatement(id, true, lock),
      decode: decoded(decodeLocked)
    }

    return { find, lock, guarded, findIdempotent, setEscrow, setReleaseAt, chainPaymentSha256 } as const
  })
}) {}
