// How many actors need an operator's attention, per kind of trouble: one bounded statement, read at /metrics scrape time
// (layers/observability/dbGauges.ts) so that an alert fires on the same facts the console shows.
import { type SqlClient, type SqlError } from "@effect/sql"
import { Effect, type ParseResult, Schema } from "effect"
import { DISABLE_AFTER_FAILURES } from "../webhooks/deliverySpec.js"

/** Each count stops here: the statement stays bounded however large a backlog grows (the gauge then reads "at least"). */
export const ATTENTION_CAP = 10_000

/** A treasury transaction not mined this long after it was signed is stuck (a devnet or L2 mines in seconds). */
export const TREASURY_PENDING_AFTER_SECONDS = 120
/** A refund not confirmed this long after it was owed. */
export const REFUND_UNCONFIRMED_AFTER_SECONDS = 120
/** A withdrawal still processing (its payout sent, no receipt) this long after it was requested. */
export const WITHDRAWAL_PROCESSING_AFTER_SECONDS = 600
/** Failed settlements are counted for this long (they are final: the count falls as they age out). */
export const SETTLEMENT_FAILED_WINDOW_SECONDS = 24 * 60 * 60

/** The kinds of trouble, in the order of the spec's list (issue 30). */
export const ATTENTION_KINDS = [
  "execution_past_deadline",
  "settlement_retrying",
  "settlement_failed",
  "treasury_pending_long",
  "treasury_replaced",
  "refund_unconfirmed",
  "withdrawal_processing_long",
  "dispute_escalated",
  "webhook_subscription_disabled",
  "webhook_dead_letter",
  "circuit_open",
  "reconciliation_drift"
] as const
export type AttentionKind = (typeof ATTENTION_KINDS)[number]

const Row = Schema.Struct({
  executionPastDeadline: Schema.Number,
  settlementRetrying: Schema.Number,
  settlementFailed: Schema.Number,
  treasuryPendingLong: Schema.Number,
  treasuryReplaced: Schema.Number,
  refundUnconfirmed: Schema.Number,
  withdrawalProcessingLong: Schema.Number,
  disputeEscalated: Schema.Number,
  webhookSubscriptionDisabled: Schema.Number,
  webhookDeadLetter: Schema.Number,
  circuitOpen: Schema.Number,
  driftMicroUsdc: Schema.NullOr(Schema.BigInt)
})

export interface AttentionCounts {
  readonly counts: Readonly<Record<AttentionKind, number>>
  /** The newest reconciliation check's drift when it was confirmed (chain − ledger, micro-USDC), else 0. */
  readonly driftMicroUsdc: bigint
}

/**
 * Every count reads through an index whose rows are the ones in trouble (machine_timers_due, payments_unfinished,
 * treasury_txs_unfinished, refunds_unfinished, disputes_status, and the partial indexes of migration 0028: failed
 * payments, processing withdrawals, switched-off subscriptions, waiting dead letters, circuits not closed), each
 * stopping at ATTENTION_CAP rows.
 */
export const attentionCounts = (sql: SqlClient.SqlClient): Effect.Effect<AttentionCounts, SqlError.SqlError | ParseResult.ParseError> =>
  sql`
    SELECT
      (SELECT count(*) FROM (SELECT 1 FROM machine_timers WHERE fired_at IS NULL AND due_at < now()
         AND machine = 'execution' AND event_type = 'AGENT_DEADLINE' LIMIT ${ATTENTION_CAP}) x)::int AS execution_past_deadline,
      (SELECT count(*) FROM (SELECT 1 FROM payments WHERE status = 'retrying' LIMIT ${ATTENTION_CAP}) x)::int AS settlement_retrying,
      (SELECT count(*) FROM (SELECT 1 FROM payments WHERE status = 'failed'
         AND created_at > now() - make_interval(secs => ${SETTLEMENT_FAILED_WINDOW_SECONDS}) LIMIT ${ATTENTION_CAP}) x)::int AS settlement_failed,
      (SELECT count(*) FROM (SELECT 1 FROM treasury_txs WHERE state IN ('signed', 'broadcast')
         AND created_at < now() - make_interval(secs => ${TREASURY_PENDING_AFTER_SECONDS}) LIMIT ${ATTENTION_CAP}) x)::int AS treasury_pending_long,
      (SELECT count(*) FROM (SELECT 1 FROM treasury_txs WHERE state IN ('signed', 'broadcast')
         AND cardinality(replaced_hashes) > 0 LIMIT ${ATTENTION_CAP}) x)::int AS treasury_replaced,
      (SELECT count(*) FROM (SELECT 1 FROM refunds WHERE status IN ('pending', 'submitted')
         AND created_at < now() - make_interval(secs => ${REFUND_UNCONFIRMED_AFTER_SECONDS}) LIMIT ${ATTENTION_CAP}) x)::int AS refund_unconfirmed,
      (SELECT count(*) FROM (SELECT 1 FROM withdrawals WHERE status = 'processing'
         AND created_at < now() - make_interval(secs => ${WITHDRAWAL_PROCESSING_AFTER_SECONDS}) LIMIT ${ATTENTION_CAP}) x)::int AS withdrawal_processing_long,
      (SELECT count(*) FROM (SELECT 1 FROM disputes WHERE status = 'escalated' LIMIT ${ATTENTION_CAP}) x)::int AS dispute_escalated,
      (SELECT count(*) FROM (SELECT 1 FROM webhook_subscriptions WHERE NOT is_active AND deleted_at IS NULL
         AND failure_count >= ${DISABLE_AFTER_FAILURES} LIMIT ${ATTENTION_CAP}) x)::int AS webhook_subscription_disabled,
      (SELECT count(*) FROM (SELECT 1 FROM webhook_dead_letters WHERE requeued_at IS NULL LIMIT ${ATTENTION_CAP}) x)::int AS webhook_dead_letter,
      (SELECT count(*) FROM agents WHERE circuit_state <> 'closed' AND circuit_state = 'open')::int AS circuit_open,
      (SELECT CASE WHEN confirmed THEN drift ELSE 0 END FROM treasury_reconciliations
         WHERE kind = 'check' ORDER BY id DESC LIMIT 1)::text AS drift_micro_usdc`.pipe(
    Effect.flatMap(([row]) => Schema.decodeUnknown(Row)(row)),
    Effect.map((r): AttentionCounts => {
      const drift = r.driftMicroUsdc ?? 0n
      return {
        counts: {
          execution_past_deadline: r.executionPastDeadline,
          settlement_retrying: r.settlementRetrying,
          settlement_failed: r.settlementFailed,
          treasury_pending_long: r.treasuryPendingLong,
          treasury_replaced: r.treasuryReplaced,
          refund_unconfirmed: r.refundUnconfirmed,
          withdrawal_processing_long: r.withdrawalProcessingLong,
          dispute_escalated: r.disputeEscalated,
          webhook_subscription_disabled: r.webhookSubscriptionDisabled,
          webhook_dead_letter: r.webhookDeadLetter,
          circuit_open: r.circuitOpen,
          reconciliation_drift: drift === 0n ? 0 : 1
        },
        driftMicroUsdc: drift
      }
    }),
    Effect.withSpan("Operator.attentionCounts")
  )
