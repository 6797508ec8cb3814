-- Withdrawals: an agent's available earnings paid out on chain from the treasury. The row carries its machine
-- (machines/withdrawal.ts); the payout is a treasury transaction (purpose 'withdrawal'), confirmed by its Transfer log.
CREATE TABLE withdrawals (
  id text PRIMARY KEY CHECK (id LIKE 'wd\_%'),
  agent_id uuid NOT NULL REFERENCES agents (id),
  amount bigint NOT NULL CHECK (amount >= 1000000),
  fee bigint NOT NULL CHECK (fee >= 0),
  net_amount bigint NOT NULL CHECK (net_amount > 0 AND net_amount = amount - fee),
  destination_wallet text NOT NULL CHECK (destination_wallet ~ '^0x[0-9a-f]{40}$'),
  status text NOT NULL CHECK (status IN ('pending', 'processing', 'completed', 'failed')),
  machine_snapshot jsonb NOT NULL,
  treasury_tx_id text REFERENCES treasury_txs (id),
  tx_hash text,
  block_number bigint,
  last_error text,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE UNIQUE INDEX withdrawals_tx_hash ON withdrawals (tx_hash) WHERE tx_hash IS NOT NULL;
CREATE INDEX withdrawals_agent ON withdrawals (agent_id, created_at DESC);
CREATE INDEX withdrawals_due ON withdrawals (next_attempt_at) WHERE status = 'pending';

ALTER TABLE treasury_txs DROP CONSTRAINT treasury_txs_purpose_check;
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_purpose_check CHECK (purpose IN ('settlement', 'refund', 'gap_fill', 'withdrawal'));

INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('withdrawals_payable', 'liability', 'Withdrawals requested by agents, not yet paid out on chain');
