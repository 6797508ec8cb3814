-- Execution callbacks (callbackUrl/webhookUrl) become webhook deliveries: one delivery machine, one sender, one attempt
-- log and one dead-letter table for both. A delivery's target is a subscription (its URL and whsec_ secret) or an
-- execution's callback (the URL on the delivery, signed with the key from the client's X-PAYMENT); execution_callbacks
-- is folded in and dropped.
ALTER TABLE webhook_deliveries
  ADD COLUMN target text NOT NULL DEFAULT 'subscription' CHECK (target IN ('subscription', 'callback')),
  ADD COLUMN execution_id text REFERENCES executions (id),
  ADD COLUMN url text CHECK (length(url) <= 2048),
  -- Creation order (created_at can tie): the newest callback post of an execution supersedes the older ones.
  ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY,
  ALTER COLUMN subscription_id DROP NOT NULL;
ALTER TABLE webhook_deliveries ALTER COLUMN target DROP DEFAULT;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_target_fits CHECK (
  (target = 'subscription' AND subscription_id IS NOT NULL AND execution_id IS NULL AND url IS NULL)
  OR (target = 'callback' AND subscription_id IS NULL AND execution_id IS NOT NULL AND url IS NOT NULL));
-- A callback post replaced by a newer result of its execution before it was delivered ends 'superseded'.
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'delivered', 'dead', 'superseded'));
CREATE INDEX webhook_deliveries_execution ON webhook_deliveries (execution_id, seq DESC) WHERE execution_id IS NOT NULL;

-- A callback's dead letter has no subscription (nothing to requeue through the webhook API, nothing to disable).
ALTER TABLE webhook_dead_letters ALTER COLUMN subscription_id DROP NOT NULL;

-- Existing callbacks with a result: pending ones keep their attempt count and due time (the snapshot carries both);
-- delivered ones stay delivered; exhausted ones ('failed') are dead with a dead-letter entry. The old table kept only
-- the last attempt: it is logged as that attempt (its time is the migration's). 'waiting' rows had no result yet: the
-- URL is on the execution, which posts when its result comes.
INSERT INTO webhook_deliveries (id, target, execution_id, url, event_id, event_type, body, status, machine_snapshot, attempt_count,
                                response_status, next_attempt_at, delivered_at, created_at)
SELECT 'del_' || c.id, 'callback', c.execution_id, c.url, c.execution_id || ':' || c.event_type, c.event_type, c.payload::text,
       m.status,
       jsonb_build_object('value', m.status, 'context', jsonb_build_object(
         'attempts', c.attempts,
         'nextAttemptAt', CASE WHEN m.status = 'pending' AND c.attempts > 0 THEN (extract(epoch FROM c.next_attempt_at) * 1000)::bigint END)),
       c.attempts, c.last_status, c.next_attempt_at, c.delivered_at, c.created_at
FROM execution_callbacks c
CROSS JOIN LATERAL (SELECT CASE c.status WHEN 'failed' THEN 'dead' ELSE c.status END AS status) m
WHERE c.status <> 'waiting' AND c.event_type IS NOT NULL AND c.payload IS NOT NULL;

INSERT INTO webhook_attempts (id, delivery_id, attempt_number, response_status, error_message, response_time_ms, created_at)
SELECT 'att_' || c.id, 'del_' || c.id, c.attempts, c.last_status, c.last_error, 0, COALESCE(c.delivered_at, now())
FROM execution_callbacks c
WHERE c.status <> 'waiting' AND c.event_type IS NOT NULL AND c.payload IS NOT NULL AND c.attempts > 0;

INSERT INTO webhook_dead_letters (id, delivery_id, subscription_id, event_type, last_attempt_at, total_attempts, last_error)
SELECT 'dlq_' || c.id, 'del_' || c.id, NULL, c.event_type, now(), c.attempts, c.last_error
FROM execution_callbacks c
WHERE c.status = 'failed' AND c.event_type IS NOT NULL AND c.payload IS NOT NULL;

DROP TABLE execution_callbacks;
