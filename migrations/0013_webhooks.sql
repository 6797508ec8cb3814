-- Webhook subscriptions: an agent's endpoints for its events. The signing secret is stored encrypted (AES-256-GCM with
-- WEBHOOK_SECRET_KEY), so a database dump alone does not reveal it.
CREATE TABLE webhook_subscriptions (
  id text PRIMARY KEY CHECK (id LIKE 'wh\_%'),
  agent_id uuid NOT NULL REFERENCES agents (id),
  url text NOT NULL CHECK (length(url) <= 2048),
  events jsonb NOT NULL CHECK (jsonb_typeof(events) = 'array' AND jsonb_array_length(events) BETWEEN 1 AND 32),
  is_active boolean NOT NULL DEFAULT true,
  secret_encrypted text NOT NULL,
  failure_count integer NOT NULL DEFAULT 0,
  last_failure timestamptz,
  last_success timestamptz,
  deleted_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_subscriptions_agent ON webhook_subscriptions (agent_id) WHERE deleted_at IS NULL;
