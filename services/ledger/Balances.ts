// Where an agent's money is (balance view) and what one transaction did with the money (single view), from the ledger and escrows.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { NotFound } from "../../src/domain/Errors.js"
import { formatUsdc } from "../../src/domain/Money.js"
import { Accounts } from "./Ledger.js"

const BalanceRow = Schema.Struct({
  available: Schema.BigInt,
  totalEarned: Schema.BigInt,
  pending: Schema.BigInt,
  escrowCount: Schema.Number,
  escrowTotal: Schema.BigInt,
  executionCount: Schema.Number,
  totalWithdrawn: Schema.BigInt,
  totalDisputed: Schema.BigInt
})

const TxRow = Schema.Struct({
  transactionId: Schema.String,
  paymentPurpose: Schema.String,
  id: Schema.String,
  payer: Schema.String,
  /** The agent whose chained call this was (its parent execution's agent); null when a client paid. */
  requestingAgent: Schema.NullOr(Schema.String),
  agentId: Schema.String,
  capabilityId: Schema.String,
  status: Schema.String,
  price: Schema.BigInt,
  platformFee: Schema.BigInt,
  agentFee: Schema.BigInt,
  platformCut: Schema.BigInt,
  agentEarnings: Schema.BigInt,
  executionTimeMs: Schema.NullOr(Schema.Number),
  escrowId: Schema.String,
  escrowStatus: Schema.String,
  releaseAt: Schema.NullOr(Schema.DateFromSelf),
  settlementState: Schema.String,
  settlementTxHash: Schema.NullOr(Schema.String),
  network: Schema.String,
  refundTxHash: Schema.NullOr(Schema.String),
  disputeId: Schema.NullOr(Schema.String),
  createdAt: Schema.DateFromSelf,
  completedAt: Schema.NullOr(Schema.DateFromSelf)
})

export class Balances extends Effect.Service<Balances>()("Balances", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** available: withdrawable (ledger); pending: the agent's share of escrows held for completed executions. */
    const balance = (agentId: string) =>
      Effect.gen(function* () {
        const exists = yield* sql`SELECT 1 FROM agents WHERE id = ${agentId} AND status <> 'pending'`
        if (exists.length === 0) return yield* new NotFound({ code: "AGENT_NOT_FOUND", message: `agent ${agentId} not found` })
        const available = Accounts.agentAvailable(agentId)
        const rows = yield* sql`
          SELECT
            (SELECT COALESCE(-balance, 0) FROM ledger_accounts WHERE id = ${available})::text AS available,
            (SELECT COALESCE(-SUM(e.amount), 0) FROM ledger_entries e JOIN ledger_transfers t ON t.id = e.transfer_id
               WHERE e.account_id = ${available} AND t.kind IN ('escrow_release', 'dispute_freeze', 'dispute_resolution'))::text AS total_earned,
            (SELECT COALESCE(SUM(x.agent_earnings), 0) FROM escrows s JOIN executions x ON x.id = s.execution_id
               WHERE s.agent_id = ${agentId} AND s.status = 'held' AND x.status = 'completed')::text AS pending,
            (SELECT COUNT(*) FROM escrows WHERE agent_id = ${agentId} AND status = 'held')::int AS escrow_count,
            (SELECT COALESCE(SUM(amount), 0) FROM escrows WHERE agent_id = ${agentId} AND status = 'held')::text AS escrow_total,
            (SELECT COUNT(*) FROM executions WHERE agent_id = ${agentId})::int AS execution_count,
            (SELECT COALESCE(SUM(amount), 0) FROM withdrawals WHERE agent_id = ${agentId} AND status = 'completed')::text AS total_withdrawn,
            (SELECT COALESCE(SUM(agent_amount), 0) FROM disputes WHERE agent_id = ${agentId} AND status IN ('open', 'escalated'))::text AS total_disputed`
        const row = yield* Schema.decodeUnknown(BalanceRow)(rows[0])
        return {
          agentId,
          available: formatUsdc(row.available),
          pending: formatUsdc(row.pending),
          totalEarned: formatUsdc(row.totalEarned),
          totalWithdrawn: formatUsdc(row.totalWithdrawn),
          totalDisputed: formatUsdc(row.totalDisputed),
          executionCount: row.executionCount,
          escrow: { pendingCount: row.escrowCount, pendingTotal: formatUsdc(row.escrowTotal) }
        }
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("Balances.balance"))

    /** The single view of a transaction (one paid execution). */
    const transaction = (txId: string) =>
      Effect.gen(function* () {
        const rows = yield* sql`
          SELECT x.transaction_id, x.id, x.payer, pe.agent_id AS requesting_agent, x.agent_id, x.capability_id, x.status, x.price, x.platform_fee, x.agent_fee,
                 x.platform_cut, x.agent_earnings, x.execution_time_ms, x.escrow_id, s.status AS escrow_status, s.release_at,
                 p.status AS settlement_state, p.tx_hash AS settlement_tx_hash, p.network, p.purpose AS payment_purpose, r.tx_hash AS refund_tx_hash, d.id AS dispute_id, x.created_at, x.completed_at
          FROM executions x JOIN escrows s ON s.execution_id = x.id JOIN payments p ON p.id = x.payment_id
          LEFT JOIN refunds r ON r.execution_id = x.id LEFT JOIN disputes d ON d.execution_id = x.id
          LEFT JOIN executions pe ON pe.id = x.parent_execution_id
          WHERE x.transaction_id = ${txId}`
        const found = Option.fromNullable(rows[0])
        if (Option.isNone(found)) return yield* new NotFound({ code: "TRANSACTION_NOT_FOUND", message: `no transaction ${txId}` })
        const tx = yield* Schema.decodeUnknown(TxRow)(found.value)
        return {
          id: tx.transactionId,
          request_id: tx.id,
          requesting_agent: tx.requestingAgent,
          payer: tx.payer,
          providing_agent: tx.agentId,
          capability_id: tx.capabilityId,
          amount: formatUsdc(tx.price),
          gross_amount: formatUsdc(tx.price),
          platform_fee: formatUsdc(tx.platformFee),
          agent_fee: formatUsdc(tx.agentFee),
          platformCut: formatUsdc(tx.platformCut),
          platform_revenue: formatUsdc(tx.platformFee + tx.platformCut),
          agent_earnings: formatUsdc(tx.agentEarnings),
          status: tx.status,
          execution_time: tx.executionTimeMs,
          escrow_id: tx.escrowId,
          escrow_status: tx.escrowStatus,
          escrow_release_at: tx.releaseAt?.toISOString() ?? null,
          settlement: {
            status: tx.settlementState === "settled" ? "settled" : tx.settlementState === "reserved" ? "settlement_pending" : "settlement_failed",
            txHash: tx.settlementTxHash,
            // The network the payment was made on (its settlement and any refund are there).
            network: tx.network
          },
          refund_tx_hash: tx.refundTxHash,
          ...(tx.paymentPurpose === "credit" ? { funding: "credit" as const } : {}),
          dispute_id: tx.disputeId,
          created_at: tx.createdAt.toISOString(),
          completed_at: tx.completedAt?.toISOString() ?? null
        }
      }).pipe(Effect.catchTags({ SqlError: Effect.die, ParseError: Effect.die }), Effect.withSpan("Balances.transaction"))

    return { balance, transaction } as const
  })
}) {}
