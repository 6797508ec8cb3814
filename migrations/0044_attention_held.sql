-- "Needs attention" lists failed and timed-out calls whose payment is held for a retry (services/operator/attentionQueries.ts
-- payment_held): a partial index keeps that query to the few rows in those states.
CREATE INDEX executions_failed_held ON executions (updated_at) WHERE state IN ('failed', 'timeout');
