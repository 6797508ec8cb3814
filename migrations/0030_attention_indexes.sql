-- The operator console's "needs attention" queries (services/operator/attentionQueries.ts) read only the few rows in
-- trouble; these partial indexes keep them from scanning whole tables as they grow.
CREATE INDEX executions_running ON executions (created_at) WHERE state = 'running';
CREATE INDEX payments_failed ON payments (updated_at) WHERE status = 'failed';
CREATE INDEX withdrawals_processing ON withdrawals (created_at) WHERE status = 'processing';
CREATE INDEX webhook_dead_letters_open ON webhook_dead_letters (created_at) WHERE requeued_at IS NULL;
