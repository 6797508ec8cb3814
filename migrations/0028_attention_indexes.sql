-- Partial indexes for the needs-attention counts read at every /metrics scrape (services/operator/attentionCounts.ts):
-- each reads only the rows in trouble, however large the tables grow.
CREATE INDEX payments_failed ON payments (created_at) WHERE status = 'failed';
CREATE INDEX withdrawals_processing ON withdrawals (created_at) WHERE status = 'processing';
CREATE INDEX webhook_subscriptions_disabled ON webhook_subscriptions (agent_id) WHERE NOT is_active AND deleted_at IS NULL;
CREATE INDEX webhook_dead_letters_waiting ON webhook_dead_letters (created_at) WHERE requeued_at IS NULL;
CREATE INDEX agents_circuit_not_closed ON agents (circuit_state) WHERE circuit_state <> 'closed';
