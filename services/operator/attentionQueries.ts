// The SQL behind "needs attention": one query per kind of trouble, each answering the same columns (the actor, its agent,
// the money at stake, since when, the cause in words, the lever that acts on it). Thresholds are constants here so the
// console, the API and the metrics' gauges (layers/observability/dbGauges.ts) all mean the same thing by "stuck".
import type { SqlClient, SqlError } from "@effect/sql"
import type { Statement } from "@effect/sql/Statement"
import { Effect } from "effect"

/** A treasury transaction signed or broadcast this long ago and not mined (about 60 Base blocks) is stuck. */
export const TREASURY_PENDING_MS = 2 * 60_000
/** A refund owed this long without a confirmed transfer needs a look. */
export const REFUND_UNCONFIRMED_MS = 10 * 60_000
/** A withdrawal processing (sent, not mined) this long needs a look. */
export const WITHDRAWAL_PROCESSING_MS = 30 * 60_000
/** An open dispute whose response deadline is this close is listed before it escalates. */
export const DISPUTE_NEAR_MS = 6 * 60 * 60_000
/** Failed settlements are listed for this long after they failed (older ones are history). */
export const SETTLEMENT_FAILED_WINDOW_MS = 24 * 60 * 60_000

import { ATTENTION_KINDS, type AttentionKind } from "../../src/domain/Attention.js"

export { ATTENTION_KINDS, type AttentionKind } from "../../src/domain/Attention.js"

/** Every query selects: machine, actor_id, agent_id, amount (micro-USDC text), since, cause, lever, lever_target. */
export const attentionQuery = (sql: SqlClient.SqlClient, kind: AttentionKind, now: Date): Statement<object> => {
  const ago = (ms: number) => new Date(now.getTime() - ms)
  switch (kind) {
    case "execution_overdue":
      // A running attempt past its hard deadline (agent timeout + grace): the agent hangs or the process that called it died.
      return sql`SELECT 'execution' AS machine, t.id AS actor_id, t.agent_id::text AS agent_id, t.price::text AS amount,
          to_timestamp(((t.machine_snapshot->'context'->>'startedAt')::bigint + (t.machine_snapshot->'context'->>'deadlineMs')::bigint) / 1000.0) AS since,
          format('attempt %s still running past its deadline (started %s); the agent has not answered', t.attempts, to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"')) AS cause,
          'suspend_agent' AS lever, t.agent_id::text AS lever_target
        FROM executions t
        WHERE t.state = 'running'
          AND (t.machine_snapshot->'context'->>'startedAt')::bigint + (t.machine_snapshot->'context'->>'deadlineMs')::bigint < ${now.getTime()}`
    case "payment_held":
      // A failed or timed-out call: the payer's money stays in escrow for a retry until its window closes, then goes back.
      return sql`SELECT 'execution' AS machine, t.id AS actor_id, t.agent_id::text AS agent_id, e.amount::text AS amount,
          t.updated_at AS since,
          format('call %s; the payment of %s is held for a retry until %s, then refunded', CASE t.state WHEN 'timeout' THEN 'timed out' ELSE 'failed' END,
            t.payer, coalesce(to_char(t.retry_until AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"'), 'its retry window closes')) AS cause,
          NULL AS lever, NULL AS lever_target
        FROM executions t JOIN escrows e ON e.execution_id = t.id AND e.status = 'held'
        WHERE t.state IN ('failed', 'timeout')`
    case "settlement_retrying":
      return sql`SELECT 'settlement' AS machine, t.id AS actor_id, NULL AS agent_id, t.amount::text AS amount, t.updated_at AS since,
          format('settlement retrying after %s attempt(s): %s', t.attempts, coalesce(t.failure_reason, 'no error recorded')) AS cause,
          'retry_settlement' AS lever, t.id AS lever_target
        FROM payments t WHERE t.status = 'retrying'`
    case "settlement_failed":
      return sql`SELECT 'settlement' AS machine, t.id AS actor_id, NULL AS agent_id, t.amount::text AS amount, t.updated_at AS since,
          format('settlement failed: %s', coalesce(t.failure_reason, 'no reason recorded')) AS cause, NULL AS lever, NULL AS lever_target
        FROM payments t WHERE t.status = 'failed' AND t.updated_at > ${ago(SETTLEMENT_FAILED_WINDOW_MS)}
          -- An upto authorization whose call failed was never to settle: nothing to attend to.
          AND NOT (t.purpose = 'upto' AND t.upto_charged IS NULL)`
    case "treasury_stuck":
      return sql`SELECT 'treasury' AS machine, t.id AS actor_id, NULL AS agent_id,
          coalesce(CASE t.purpose
            WHEN 'refund' THEN (SELECT r.amount FROM refunds r WHERE r.id = t.subject_id)
            WHEN 'withdrawal' THEN (SELECT w.net_amount FROM withdrawals w WHERE w.id = t.subject_id)
            WHEN 'channel_deposit' THEN (SELECT d.amount FROM channel_deposits d WHERE d.nonce = t.subject_id)
            WHEN 'upto_settle' THEN (SELECT p.upto_charged FROM payments p WHERE p.id = t.subject_id)
            ELSE (SELECT p.amount FROM payments p WHERE p.id = t.subject_id) END, 0)::text AS amount,
          t.created_at AS since,
          format('%s transaction %s (nonce %s) %s and not mined%s%s', t.purpose, t.tx_hash, t.nonce, t.state,
            CASE WHEN cardinality(t.replaced_hashes) > 0 THEN format('; replaced %s time(s)', cardinality(t.replaced_hashes)) ELSE '' END,
            CASE WHEN t.last_error IS NOT NULL THEN format('; last error: %s', t.last_error) ELSE '' END) AS cause,
          NULL AS lever, NULL AS lever_target
        FROM treasury_txs t WHERE (t.state IN ('signed', 'broadcast') AND t.created_at < ${ago(TREASURY_PENDING_MS)})
          -- Booked, then taken out by a reorg (services/treasury/Finality.ts): worth a look at once, until it is included again.
          OR t.state = 'reorged'`
    case "refund_unconfirmed":
      return sql`SELECT 'execution' AS machine, coalesce(t.execution_id, t.id) AS actor_id,
          (SELECT e.agent_id::text FROM executions e WHERE e.id = t.execution_id) AS agent_id, t.amount::text AS amount, t.created_at AS since,
          format('refund %s to %s %s after %s attempt(s)%s', t.id, t.to_address,
            CASE t.status WHEN 'failed' THEN 'failed' WHEN 'submitted' THEN format('sent as %s, not confirmed', coalesce(t.tx_hash, (SELECT x.tx_hash FROM treasury_txs x WHERE x.id = t.treasury_tx_id))) ELSE 'not sent yet' END,
            t.attempts, CASE WHEN t.last_error IS NOT NULL THEN format('; last error: %s', t.last_error) ELSE '' END) AS cause,
          CASE WHEN t.status = 'pending' THEN 'retry_refund' END AS lever, CASE WHEN t.status = 'pending' THEN t.id END AS lever_target
        FROM refunds t
        WHERE t.status = 'failed' OR (t.status IN ('pending', 'submitted') AND t.created_at < ${ago(REFUND_UNCONFIRMED_MS)})`
    case "withdrawal_slow":
      return sql`SELECT 'withdrawal' AS machine, t.id AS actor_id, t.agent_id::text AS agent_id, t.amount::text AS amount, t.created_at AS since,
          format('withdrawal to %s still processing%s%s', t.destination_wallet,
            CASE WHEN t.tx_hash IS NOT NULL THEN format(' (sent as %s)', t.tx_hash) ELSE '' END,
            CASE WHEN t.last_error IS NOT NULL THEN format('; last error: %s', t.last_error) ELSE '' END) AS cause,
          NULL AS lever, NULL AS lever_target
        FROM withdrawals t WHERE t.status = 'processing' AND t.created_at < ${ago(WITHDRAWAL_PROCESSING_MS)}`
    case "dispute_escalated":
      return sql`SELECT 'dispute' AS machine, t.id AS actor_id, t.agent_id::text AS agent_id, t.amount::text AS amount,
          coalesce(t.escalated_at, t.updated_at) AS since,
          format('dispute escalated (%s): %s; waiting for an operator''s resolution', t.reason, coalesce(t.escalation_reason, 'no reason recorded')) AS cause,
          'resolve_dispute' AS lever, t.id AS lever_target
        FROM disputes t WHERE t.status = 'escalated'`
    case "dispute_due_soon":
      return sql`SELECT 'dispute' AS machine, t.id AS actor_id, t.agent_id::text AS agent_id, t.amount::text AS amount, t.created_at AS since,
          format('open dispute (%s) unanswered by the agent; escalates at %s', t.reason, to_char(t.respond_by AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"')) AS cause,
          'resolve_dispute' AS lever, t.id AS lever_target
        FROM disputes t WHERE t.status = 'open' AND t.responded_at IS NULL AND t.respond_by < ${new Date(now.getTime() + DISPUTE_NEAR_MS)}`
    case "webhook_switched_off":
      // Switched off by the platform (consecutive failures), not by its owner (who leaves failure_count below the limit).
      return sql`SELECT NULL AS machine, t.id AS actor_id, t.agent_id::text AS agent_id, '0' AS amount, coalesce(t.last_failure, t.updated_at) AS since,
          format('webhook to %s switched off after %s consecutive failed deliveries', t.url, t.failure_count) AS cause,
          NULL AS lever, NULL AS lever_target
        FROM webhook_subscriptions t WHERE NOT t.is_active AND t.deleted_at IS NULL AND t.failure_count >= 10`
    case "delivery_dead":
      return sql`SELECT 'webhookDelivery' AS machine, t.delivery_id AS actor_id, s.agent_id::text AS agent_id, '0' AS amount, t.created_at AS since,
          format('%s delivery to %s dead after %s attempts: %s', t.event_type, s.url, t.total_attempts, coalesce(t.last_error, 'no error recorded')) AS cause,
          'requeue_delivery' AS lever, t.delivery_id AS lever_target
        FROM webhook_dead_letters t JOIN webhook_subscriptions s ON s.id = t.subscription_id WHERE t.requeued_at IS NULL`
    case "circuit_open":
      return sql`SELECT 'circuit' AS machine, t.id::text AS actor_id, t.id::text AS agent_id,
          coalesce((SELECT sum(e.amount) FROM escrows e WHERE e.agent_id = t.id AND e.status = 'held'), 0)::text AS amount, t.updated_at AS since,
          format('circuit %s for agent %s: calls are refused before payment%s', t.circuit_state, t.name,
            CASE WHEN t.circuit_snapshot->'context'->>'forced' = 'true' THEN ' (forced by an operator)' ELSE ' after failed calls' END) AS cause,
          'force_circuit_closed' AS lever, t.id::text AS lever_target
        FROM agents t WHERE t.circuit_state = 'open' AND t.status <> 'pending'`
    case "reconciliation_drift":
      return sql`SELECT NULL AS machine, t.id::text AS actor_id, NULL AS agent_id, abs(t.drift)::text AS amount, t.checked_at AS since,
          format('treasury%s on chain %s, ledger %s (micro-USDC) at block %s: drift %s',
            CASE WHEN t.network = '' THEN '' ELSE ' on ' || t.network END, t.chain_balance, t.ledger_balance, t.block_number, t.drift) AS cause,
          NULL AS lever, NULL AS lever_target
        FROM (SELECT DISTINCT ON (network) * FROM treasury_reconciliations WHERE kind = 'check' ORDER BY network, id DESC) t
        WHERE t.confirmed AND t.drift <> 0`
    case "channel_claim_failed":
      // What the payer's vouchers let us charge is only a receivable until a claim lands: failed claims put it at risk.
      return sql`SELECT 'channel' AS machine, t.id AS actor_id, NULL AS agent_id,
          greatest(t.charged_cumulative - t.claimed_on_chain - t.written_off, 0)::text AS amount, t.updated_at AS since,
          format('claim of channel %s (payer %s on %s) failed: %s', t.id, t.payer, t.network,
            coalesce(t.machine_snapshot->'context'->>'lastError', 'no reason recorded')) AS cause,
          NULL AS lever, NULL AS lever_target
        FROM channels t WHERE t.status = 'claimFailed'`
    case "channel_withdrawing":
      // The payer's withdrawal clock runs: what is charged and not claimed on chain by finalizable_at is lost.
      return sql`SELECT 'channel' AS machine, t.id AS actor_id, NULL AS agent_id,
          greatest(t.charged_cumulative - t.claimed_on_chain - t.written_off, 0)::text AS amount, t.updated_at AS since,
          format('payer %s is withdrawing channel %s on %s; it can finalize at %s%s', t.payer, t.id, t.network,
            coalesce(to_char(t.finalizable_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS "UTC"'), 'an unknown time'),
            CASE WHEN t.charged_cumulative > t.claimed_on_chain THEN '; charges are not claimed on chain yet' ELSE '; everything charged is claimed' END) AS cause,
          NULL AS lever, NULL AS lever_target
        FROM channels t WHERE t.status = 'withdrawing' AND t.charged_cumulative - t.claimed_on_chain - t.written_off > 0`
  }
}

export type AttentionCounts = { readonly [K in AttentionKind]: number }

export const zeros = (): { [K in AttentionKind]: number } => ({
  execution_overdue: 0,
  payment_held: 0,
  settlement_retrying: 0,
  settlement_failed: 0,
  treasury_stuck: 0,
  refund_unconfirmed: 0,
  withdrawal_slow: 0,
  dispute_escalated: 0,
  dispute_due_soon: 0,
  webhook_switched_off: 0,
  delivery_dead: 0,
  circuit_open: 0,
  reconciliation_drift: 0,
  channel_claim_failed: 0,
  channel_withdrawing: 0
})

/** The number of stuck or failing actors per kind at `now`: exactly what the console lists (every kind, zeros included). */
export const attentionCounts = (sql: SqlClient.SqlClient, now: Date): Effect.Effect<AttentionCounts, SqlError.SqlError> =>
  Effect.map(
    Effect.forEach(
      ATTENTION_KINDS,
      (kind) => Effect.map(sql<{ n: number }>`SELECT count(*)::int AS n FROM (${attentionQuery(sql, kind, now)}) q`, (r) => [kind, r[0]?.n ?? 0] as const),
      { concurrency: 4 }
    ),
    (rows) => {
      const counts = zeros()
      for (const [kind, n] of rows) counts[kind] = n
      return counts
    }
  )
