-- The "needs attention" queries (services/operator/attentionQueries.ts: the console, its API and the /metrics gauges) read only the few rows in
-- trouble; these partial indexes keep them from scanning whole tables as they grow.
CREATE INDEX executions_running ON executions (created_at) WHERE state = 'running';
CREATE INDEX payments_failed ON payments (updated_at) WHERE status = 'failed';
CREATE INDEX withdrawals_processing ON withdrawals (created_at) WHERE status = 'processing';
CREATE INDEX webhook_dead_letters_open ON webhook_dead_letters (created_at) WHERE requeued_at IS NULL;
CREATE INDEX webhook_subscriptions_disabled ON webhook_subscriptions (agent_id) WHERE NOT is_active AND deleted_at IS NULL;
CREATE INDEX agents_circuit_not_closed ON agents (circuit_state) WHERE circuit_state <> 'closed';
