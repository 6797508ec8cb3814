-- One writer for every treasury transaction: nonces allocated from PostgreSQL, each transaction signed and stored before
-- it is broadcast, refunds confirmed from the chain's own Transfer logs, and the ledger's treasury reconciled with the chain.

-- The next nonce of each signer. Allocation takes this row's lock inside the transaction that stores the signed bytes,
-- so a nonce is never handed out twice and never lost (a rollback gives it back).
CREATE TABLE treasury_signers (
  address text PRIMARY KEY CHECK (address ~ '^0x[0-9a-f]{40}$'),
  next_nonce bigint NOT NULL CHECK (next_nonce >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE treasury_txs (
  id text PRIMARY KEY,
  purpose text NOT NULL CHECK (purpose IN ('settlement', 'refund', 'gap_fill')),
  subject_id text NOT NULL,
  signer text NOT NULL REFERENCES treasury_signers (address),
  nonce bigint NOT NULL CHECK (nonce >= 0),
  to_address text NOT NULL,
  raw_tx text NOT NULL,
  tx_hash text NOT NULL,
  state text NOT NULL CHECK (state IN ('signed', 'broadcast', 'confirmed', 'reverted', 'dropped')),
  machine_snapshot jsonb NOT NULL,
  block_number bigint,
  last_error text,
  attempts integer NOT NULL DEFAULT 0,
  lease_until timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  mined_at timestamptz
);
-- A signed transaction is one row: a second row with the same hash (the old refund bug) is impossible.
CREATE UNIQUE INDEX treasury_txs_hash ON treasury_txs (tx_hash);
-- One live transaction per nonce; a dropped one gives its nonce to the transaction that replaced it.
CREATE UNIQUE INDEX treasury_txs_live_nonce ON treasury_txs (signer, nonce) WHERE state <> 'dropped';
CREATE INDEX treasury_txs_unfinished ON treasury_txs (lease_until) WHERE state IN ('signed', 'broadcast');
CREATE INDEX treasury_txs_subject ON treasury_txs (purpose, subject_id);

-- Refunds now point at their treasury transaction; the hash is unique (one refund per on-chain transfer).
ALTER TABLE refunds ADD COLUMN treasury_tx_id text REFERENCES treasury_txs (id);
ALTER TABLE refunds ADD COLUMN block_number bigint;

-- Before this migration, concurrent refunds of the same amount to the same payer could become byte-identical
-- transactions: one was mined and every row sharing its hash was confirmed and booked. Keep the first row per hash as
-- paid; the others were never paid: give their booking back to refunds payable and queue them to be sent again.
CREATE TEMP TABLE unpaid_refunds ON COMMIT DROP AS
  SELECT id, amount FROM (
    SELECT id, amount, row_number() OVER (PARTITION BY tx_hash ORDER BY confirmed_at, id) AS n
    FROM refunds WHERE status = 'confirmed' AND tx_hash IS NOT NULL) ranked
  WHERE n > 1;
INSERT INTO ledger_transfers (id, kind, subject_id, memo)
  SELECT 'ltr_m5_' || id, 'refund_unsent_correction', id, 'migration 0005: this refund shared a transaction hash with another and was never sent'
  FROM unpaid_refunds;
INSERT INTO ledger_entries (transfer_id, account_id, amount)
  SELECT 'ltr_m5_' || id, 'treasury', amount FROM unpaid_refunds
  UNION ALL
  SELECT 'ltr_m5_' || id, 'refunds_payable', -amount FROM unpaid_refunds;
UPDATE refunds SET status = 'pending', tx_hash = NULL, raw_tx = NULL, confirmed_at = NULL, next_attempt_at = now(),
  last_error = 'migration 0005: shared a transaction hash with another refund and was never sent; sending again'
  WHERE id IN (SELECT id FROM unpaid_refunds);
CREATE UNIQUE INDEX refunds_tx_hash ON refunds (tx_hash) WHERE tx_hash IS NOT NULL AND status = 'confirmed';

-- A settlement we submitted is a treasury transaction too.
ALTER TABLE payments ADD COLUMN treasury_tx_id text REFERENCES treasury_txs (id);

-- Treasury movements carry the block they were mined in, so the ledger's treasury can be compared with the chain's
-- balance at one block.
ALTER TABLE ledger_transfers ADD COLUMN chain_block bigint;
ALTER TABLE ledger_transfers ADD COLUMN tx_hash text;
ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_check;
ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check CHECK (kind IN ('asset', 'liability', 'revenue', 'equity'));
INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('treasury_opening', 'equity', 'USDC the treasury held on chain (beyond what the ledger explained) when reconciling started');

-- Each reconciliation: the chain's treasury balance at a block against the ledger's treasury up to that block.
CREATE TABLE treasury_reconciliations (
  id bigserial PRIMARY KEY,
  block_number bigint NOT NULL,
  chain_balance bigint NOT NULL,
  ledger_balance bigint NOT NULL,
  drift bigint NOT NULL,
  -- 'opening' (once: the baseline booked to treasury_opening), or 'check'; a check's drift is `confirmed` when the same
  -- block still disagrees after in-flight bookings had time to land.
  kind text NOT NULL CHECK (kind IN ('opening', 'check')),
  confirmed boolean NOT NULL,
  checked_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX treasury_reconciliations_opening ON treasury_reconciliations (kind) WHERE kind = 'opening';
