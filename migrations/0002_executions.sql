-- Paid executions: persisted machines (execution, settlement, circuit), escrow per transaction, durable timers,
-- on-chain refunds, reputation events, rate-limit windows and result callbacks.

-- Every machine transition, for operators and audits (event, from, to, time).
CREATE TABLE machine_transitions (
  id bigserial PRIMARY KEY,
  machine text NOT NULL,
  actor_id text NOT NULL,
  event_type text NOT NULL,
  event jsonb NOT NULL,
  from_state text,
  to_state text NOT NULL,
  at timestamptz NOT NULL
);
CREATE INDEX machine_transitions_actor ON machine_transitions (machine, actor_id, id);

-- Deadlines that must survive a restart: fired by a worker as events into their machine.
CREATE TABLE machine_timers (
  id bigserial PRIMARY KEY,
  machine text NOT NULL,
  actor_id text NOT NULL,
  event_type text NOT NULL,
  event jsonb NOT NULL,
  due_at timestamptz NOT NULL,
  fired_at timestamptz,
  attempts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now()
);
-- One pending timer per (actor, event): scheduling again moves it instead of adding a second.
CREATE UNIQUE INDEX machine_timers_pending ON machine_timers (machine, actor_id, event_type) WHERE fired_at IS NULL;
CREATE INDEX machine_timers_due ON machine_timers (due_at) WHERE fired_at IS NULL;

-- The settlement lifecycle of a payment is a machine too: reserved (settlement_pending), retrying
-- (settlement_failed, will retry), settled, failed (final).
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
UPDATE payments SET status = 'reserved' WHERE status = 'submitted';
ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('reserved', 'retrying', 'settled', 'failed'));
ALTER TABLE payments ADD COLUMN machine_snapshot jsonb;
DROP INDEX payments_unfinished;
CREATE INDEX payments_unfinished ON payments (next_attempt_at) WHERE status IN ('reserved', 'retrying');

ALTER TABLE agents ADD COLUMN circuit_snapshot jsonb;
ALTER TABLE agents ADD COLUMN health_checked_at timestamptz;
ALTER TABLE agents ADD COLUMN failed_executions bigint NOT NULL DEFAULT 0;

CREATE TABLE executions (
  id text PRIMARY KEY,
  transaction_id text NOT NULL UNIQUE,
  escrow_id text NOT NULL UNIQUE,
  payment_id text NOT NULL UNIQUE REFERENCES payments (id),
  payer text NOT NULL,
  agent_id uuid NOT NULL REFERENCES agents (id),
  capability_id text NOT NULL,
  input jsonb NOT NULL,
  request_hash text NOT NULL,
  idempotency_key text,
  mode text NOT NULL CHECK (mode IN ('sync', 'async', 'callback')),
  callback_url text,
  -- The API status, derived from the machine state in the same statement that stores the snapshot.
  status text NOT NULL CHECK (status IN ('pending', 'completed', 'failed', 'timeout', 'refunded')),
  state text NOT NULL,
  machine_snapshot jsonb NOT NULL,
  output jsonb,
  error text,
  error_kind text,
  execution_time_ms integer,
  attempts integer NOT NULL DEFAULT 1,
  price bigint NOT NULL CHECK (price > 0),
  platform_fee bigint NOT NULL CHECK (platform_fee >= 0),
  agent_fee bigint NOT NULL CHECK (agent_fee >= 0),
  platform_cut bigint NOT NULL CHECK (platform_cut >= 0),
  agent_earnings bigint NOT NULL CHECK (agent_earnings >= 0),
  depth integer NOT NULL DEFAULT 0,
  parent_execution_id text REFERENCES executions (id),
  retry_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  CHECK (price = platform_fee + agent_fee AND agent_fee = platform_cut + agent_earnings)
);
CREATE UNIQUE INDEX executions_idempotency ON executions (payer, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX executions_agent ON executions (agent_id, created_at);
CREATE INDEX executions_created ON executions (created_at);

-- Escrow, addressable per transaction: the whole price is held until it is released (split between platform and
-- agent), refunded to the payer, or voided (the payment never settled).
CREATE TABLE escrows (
  id text PRIMARY KEY,
  execution_id text NOT NULL UNIQUE REFERENCES executions (id),
  agent_id uuid NOT NULL REFERENCES agents (id),
  amount bigint NOT NULL CHECK (amount > 0),
  status text NOT NULL CHECK (status IN ('held', 'released', 'refunding', 'refunded', 'void')),
  release_at timestamptz,
  released_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX escrows_agent_status ON escrows (agent_id, status);

-- On-chain refunds. The signed transaction is stored before it is broadcast, so a crash can never send it twice
-- nor lose it: recovery re-broadcasts the same bytes or reads its receipt.
CREATE TABLE refunds (
  id text PRIMARY KEY,
  execution_id text NOT NULL UNIQUE REFERENCES executions (id),
  payment_id text NOT NULL REFERENCES payments (id),
  to_address text NOT NULL,
  amount bigint NOT NULL CHECK (amount > 0),
  status text NOT NULL CHECK (status IN ('pending', 'submitted', 'confirmed', 'failed')),
  tx_hash text,
  raw_tx text,
  last_error text,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  confirmed_at timestamptz
);
CREATE INDEX refunds_unfinished ON refunds (next_attempt_at) WHERE status IN ('pending', 'submitted');

CREATE TABLE reputation_events (
  id text PRIMARY KEY,
  agent_id uuid NOT NULL REFERENCES agents (id),
  event_type text NOT NULL CHECK (event_type IN ('transaction_success', 'transaction_fail', 'dispute', 'rating')),
  score_delta integer NOT NULL,
  score_after integer NOT NULL CHECK (score_after BETWEEN 0 AND 100),
  details text NOT NULL,
  execution_id text REFERENCES executions (id),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reputation_events_agent ON reputation_events (agent_id, created_at);

-- Fixed rate-limit windows shared by every server process.
CREATE TABLE rate_limit_windows (
  key text NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (key, window_start)
);

-- Result posts to callbackUrl/webhookUrl, retried until delivered (or 5 attempts).
CREATE TABLE execution_callbacks (
  id text PRIMARY KEY,
  execution_id text NOT NULL UNIQUE REFERENCES executions (id),
  url text NOT NULL,
  status text NOT NULL CHECK (status IN ('waiting', 'pending', 'delivered', 'failed')),
  event_type text,
  payload jsonb,
  attempts integer NOT NULL DEFAULT 0,
  last_status integer,
  last_error text,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
);
CREATE INDEX execution_callbacks_due ON execution_callbacks (next_attempt_at) WHERE status = 'pending';
