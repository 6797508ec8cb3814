-- Webhook deliveries: one per (committed outbox event, matching active subscription), each a persisted machine
-- (machines/webhookDelivery.ts) with its attempts; after 5 failed attempts a dead-letter entry.
CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY CHECK (id LIKE 'del\_%'),
  subscription_id text NOT NULL REFERENCES webhook_subscriptions (id),
  event_id text NOT NULL,
  event_type text NOT NULL,
  -- The exact body sent with every attempt (the signature covers these bytes).
  body text NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'dead')),
  machine_snapshot jsonb NOT NULL,
  attempt_count integer NOT NULL DEFAULT 0,
  response_status integer,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  requeued_from text,
  delivered_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
-- One delivery per event and subscription (a requeue is a new delivery of the same event: it names its origin).
CREATE UNIQUE INDEX webhook_deliveries_once ON webhook_deliveries (subscription_id, event_id) WHERE requeued_from IS NULL;
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, created_at DESC);

CREATE TABLE webhook_attempts (
  id text PRIMARY KEY,
  delivery_id text NOT NULL REFERENCES webhook_deliveries (id),
  attempt_number integer NOT NULL,
  response_status integer,
  response_body text,
  error_message text,
  response_time_ms integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (delivery_id, attempt_number)
);

CREATE TABLE webhook_dead_letters (
  id text PRIMARY KEY CHECK (id LIKE 'dlq\_%'),
  delivery_id text NOT NULL UNIQUE REFERENCES webhook_deliveries (id),
  subscription_id text NOT NULL REFERENCES webhook_subscriptions (id),
  event_type text NOT NULL,
  last_attempt_at timestamptz NOT NULL,
  total_attempts integer NOT NULL,
  last_error text,
  requeued_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_dead_letters_subscription ON webhook_dead_letters (subscription_id, created_at DESC);

-- Committed events wake the dispatcher at once (it also polls).
CREATE FUNCTION outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('outbox_events', '');
  RETURN NULL;
END $$;
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify();
