// One agent as an operator sees it: its row (status, tier, circuit, health, reputation), its balance (the ledger's, via
// Balances), and its latest reputation events, executions, disputes, withdrawals and webhooks.
import { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import { Balances } from "../ledger/Balances.js"
import { rowsOf } from "../sql/Rows.js"

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i
const RECENT = 20

const AgentRow = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  wallet: Schema.String,
  status: Schema.String,
  statusReason: Schema.NullOr(Schema.String),
  trustTier: Schema.String,
  reputationScore: Schema.Number,
  healthScore: Schema.Number,
  circuitState: Schema.String,
  completedExecutions: Schema.String,
  createdAt: Schema.DateFromSelf
})
const ReputationRow = Schema.Struct({ eventType: Schema.String, scoreDelta: Schema.Number, scoreAfter: Schema.Number, details: Schema.String, executionId: Schema.NullOr(Schema.String), createdAt: Schema.DateFromSelf })
const ExecutionRow = Schema.Struct({ id: Schema.String, state: Schema.String, capabilityId: Schema.String, price: Schema.BigInt, payer: Schema.String, error: Schema.NullOr(Schema.String), createdAt: Schema.DateFromSelf })
const DisputeRow = Schema.Struct({ id: Schema.String, status: Schema.String, reason: Schema.String, amount: Schema.BigInt, respondBy: Schema.DateFromSelf, createdAt: Schema.DateFromSelf })
const WithdrawalRow = Schema.Struct({ id: Schema.String, status: Schema.String, amount: Schema.BigInt, txHash: Schema.NullOr(Schema.String), createdAt: Schema.DateFromSelf })
const WebhookRow = Schema.Struct({ id: Schema.String, url: Schema.String, isActive: Schema.Boolean, failureCount: Schema.Number, lastFailure: Schema.NullOr(Schema.DateFromSelf), lastSuccess: Schema.NullOr(Schema.DateFromSelf), deadLetters: Schema.Number })

export class AgentView extends Effect.Service<AgentView>()("operator/AgentView", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const balances = yield* Balances

    const view = (id: string) =>
      Effect.gen(function* () {
        if (!UUID.test(id)) return Option.none()
        const [agent] = yield* rowsOf(AgentRow)(sql`
          SELECT id::text AS id, name, wallet, status, status_reason, coalesce(trust_tier_override, trust_tier) AS trust_tier, reputation_score,
                 health_score, circuit_state, completed_executions::text AS completed_executions, created_at
          FROM agents WHERE id = ${id}::uuid AND status <> 'pending'`)
        if (agent === undefined) return Option.none()
        const [balance, reputation, executions, disputes, withdrawals, webhooks] = yield* Effect.all([
          balances.balance(id).pipe(Effect.option),
          rowsOf(ReputationRow)(sql`SELECT event_type, score_delta, score_after, details, execution_id, created_at FROM reputation_events
                                    WHERE agent_id = ${id}::uuid ORDER BY created_at DESC LIMIT ${RECENT}`),
          rowsOf(ExecutionRow)(sql`SELECT id, state, capability_id, price::text AS price, payer, error, created_at FROM executions
                                   WHERE agent_id = ${id}::uuid ORDER BY created_at DESC LIMIT ${RECENT}`),
          rowsOf(DisputeRow)(sql`SELECT id, status, reason, amount::text AS amount, respond_by, created_at FROM disputes
                                 WHERE agent_id = ${id}::uuid ORDER BY created_at DESC LIMIT ${RECENT}`),
          rowsOf(WithdrawalRow)(sql`SELECT id, status, amount::text AS amount, tx_hash, created_at FROM withdrawals
                                    WHERE agent_id = ${id}::uuid ORDER BY created_at DESC LIMIT ${RECENT}`),
          rowsOf(WebhookRow)(sql`SELECT s.id, s.url, s.is_active, s.failure_count, s.last_failure, s.last_success,
                                   (SELECT count(*)::int FROM webhook_dead_letters d WHERE d.subscription_id = s.id AND d.requeued_at IS NULL) AS dead_letters
                                 FROM webhook_subscriptions s WHERE s.agent_id = ${id}::uuid AND s.deleted_at IS NULL ORDER BY s.created_at DESC`)
        ], { concurrency: 3 })
        return Option.some({ agent, balance: Option.getOrNull(balance), reputation, executions, disputes, withdrawals, webhooks })
      }).pipe(Effect.orDie, Effect.withSpan("AgentView.view"))

    return { view } as const
  }),
  dependencies: [Balances.Default]
}) {}
