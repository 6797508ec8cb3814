-- Agents, payments, the double-entry ledger and the event outbox.

CREATE TABLE agents (
  id uuid PRIMARY KEY,
  wallet text NOT NULL CHECK (wallet ~ '^0x[0-9a-f]{40}$'),
  name text NOT NULL CHECK (char_length(name) BETWEEN 3 AND 100),
  description text CHECK (description IS NULL OR char_length(description) <= 1000),
  tags jsonb NOT NULL DEFAULT '[]'::jsonb,
  capabilities jsonb NOT NULL,
  endpoints jsonb NOT NULL,
  metadata jsonb,
  chain_settings jsonb NOT NULL DEFAULT '{"chain_enabled": false, "chain_max_depth": 3, "chain_allowed_callers": [], "chain_blocked_callers": []}'::jsonb,
  -- 'pending' is internal: the registration fee is being settled; such agents are invisible.
  status text NOT NULL CHECK (status IN ('pending', 'active', 'inactive', 'suspended')),
  status_reason text,
  reputation_score integer NOT NULL DEFAULT 50 CHECK (reputation_score BETWEEN 0 AND 100),
  health_score double precision NOT NULL DEFAULT 1.0 CHECK (health_score >= 0 AND health_score <= 1),
  health_updated_at timestamptz NOT NULL DEFAULT now(),
  circuit_state text NOT NULL DEFAULT 'closed' CHECK (circuit_state IN ('closed', 'open', 'half-open')),
  trust_tier text NOT NULL DEFAULT 'new' CHECK (trust_tier IN ('new', 'trusted', 'premium')),
  trust_tier_override text CHECK (trust_tier_override IS NULL OR trust_tier_override IN ('new', 'trusted', 'premium')),
  completed_executions bigint NOT NULL DEFAULT 0,
  registration_payment_id text,
  registration_tx_hash text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- One wallet maps to one agent, whatever the agent's status.
CREATE UNIQUE INDEX agents_wallet_key ON agents (wallet);
CREATE INDEX agents_created_at ON agents (created_at);

-- A signed EIP-3009 authorization we accepted. The unique keys make a payment usable once,
-- even under concurrent requests: the second insert of the same authorization fails.
CREATE TABLE payments (
  id text PRIMARY KEY,
  purpose text NOT NULL CHECK (purpose IN ('registration', 'execution')),
  subject_id text NOT NULL,
  payer text NOT NULL CHECK (payer ~ '^0x[0-9a-f]{40}$'),
  pay_to text NOT NULL,
  asset text NOT NULL,
  network text NOT NULL,
  amount bigint NOT NULL CHECK (amount > 0),
  nonce text NOT NULL CHECK (nonce ~ '^0x[0-9a-f]{64}$'),
  valid_after bigint NOT NULL,
  valid_before bigint NOT NULL,
  signature text NOT NULL,
  header_sha256 text NOT NULL,
  status text NOT NULL CHECK (status IN ('reserved', 'submitted', 'settled', 'failed')),
  tx_hash text,
  failure_reason text,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  settled_at timestamptz
);
CREATE UNIQUE INDEX payments_authorization_key ON payments (asset, payer, nonce);
CREATE UNIQUE INDEX payments_header_key ON payments (header_sha256);
CREATE INDEX payments_unfinished ON payments (next_attempt_at) WHERE status IN ('reserved', 'submitted');
CREATE INDEX payments_subject ON payments (subject_id);

-- Double-entry ledger. Amounts are micro-USDC; debits positive, credits negative;
-- the entries of every transfer sum to zero (checked at commit by a constraint trigger).
CREATE TABLE ledger_accounts (
  id text PRIMARY KEY,
  kind text NOT NULL CHECK (kind IN ('asset', 'liability', 'revenue')),
  agent_id uuid REFERENCES agents (id),
  description text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('treasury', 'asset', 'USDC held by the platform treasury on chain'),
  ('settlement_receivable', 'asset', 'Accepted payments not yet settled on chain'),
  ('escrow', 'liability', 'Payments held for executions in progress'),
  ('refunds_payable', 'liability', 'Refunds owed to payers, not yet sent on chain'),
  ('platform_revenue', 'revenue', 'Registration fees, execution platform fees and the platform cut');

CREATE TABLE ledger_transfers (
  id text PRIMARY KEY,
  kind text NOT NULL,
  payment_id text REFERENCES payments (id),
  agent_id uuid REFERENCES agents (id),
  subject_id text,
  memo text,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_transfers_agent ON ledger_transfers (agent_id, created_at);
CREATE INDEX ledger_transfers_subject ON ledger_transfers (subject_id);
CREATE INDEX ledger_transfers_created ON ledger_transfers (created_at);

CREATE TABLE ledger_entries (
  id bigserial PRIMARY KEY,
  transfer_id text NOT NULL REFERENCES ledger_transfers (id),
  account_id text NOT NULL REFERENCES ledger_accounts (id),
  amount bigint NOT NULL CHECK (amount <> 0),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_account ON ledger_entries (account_id, created_at);
CREATE INDEX ledger_entries_transfer ON ledger_entries (transfer_id);

-- Checked at commit, once per inserted row: the transfer's entries sum to zero and there are at least two.
CREATE FUNCTION ledger_check_balanced(tid text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  total numeric;
  entries integer;
BEGIN
  SELECT COALESCE(SUM(amount), 0), COUNT(*) INTO total, entries FROM ledger_entries WHERE transfer_id = tid;
  IF total <> 0 OR entries < 2 THEN
    RAISE EXCEPTION 'ledger transfer % is unbalanced: % entries summing to %', tid, entries, total
      USING ERRCODE = 'check_violation';
  END IF;
END $$;

CREATE FUNCTION ledger_entry_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ledger_check_balanced(NEW.transfer_id);
  RETURN NULL;
END $$;

CREATE FUNCTION ledger_transfer_balanced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM ledger_check_balanced(NEW.id);
  RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER ledger_entries_balanced AFTER INSERT ON ledger_entries
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_entry_balanced();
CREATE CONSTRAINT TRIGGER ledger_transfers_balanced AFTER INSERT ON ledger_transfers
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ledger_transfer_balanced();

-- The ledger is append-only: corrections are new transfers.
CREATE FUNCTION ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'the ledger is append-only (% on %)', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();
CREATE TRIGGER ledger_transfers_append_only BEFORE UPDATE OR DELETE ON ledger_transfers
  FOR EACH ROW EXECUTE FUNCTION ledger_append_only();

-- Any row here is a bug: used by tests and by operators as a standing audit query.
CREATE VIEW ledger_unbalanced_transfers AS
  SELECT t.id AS transfer_id, COALESCE(SUM(e.amount), 0) AS total, COUNT(e.id) AS entries
  FROM ledger_transfers t LEFT JOIN ledger_entries e ON e.transfer_id = t.id
  GROUP BY t.id
  HAVING COALESCE(SUM(e.amount), 0) <> 0 OR COUNT(e.id) < 2;

-- Domain events written in the same transaction as their cause; delivered by the webhook dispatcher.
CREATE TABLE outbox_events (
  seq bigserial PRIMARY KEY,
  id text NOT NULL UNIQUE,
  event_type text NOT NULL,
  agent_id uuid,
  payload jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  dispatched_at timestamptz
);
CREATE INDEX outbox_events_undispatched ON outbox_events (seq) WHERE dispatched_at IS NULL;
CREATE INDEX outbox_events_agent ON outbox_events (agent_id, created_at);
