-- Metered pricing (issue 28 item 2): what a metered call used and was charged, and the remainders that go back to
-- payers on chain in batches (or stay as a credit). docs/decisions.md "Metered pricing".

-- On a metered execution: what the payment authorised (price holds the charge once usage is known), the meter, the
-- usage, whether it was cut to the maximum, the accepted quote (dynamic) and where the remainder went.
ALTER TABLE executions
  ADD COLUMN authorized bigint CHECK (authorized IS NULL OR authorized > 0),
  ADD COLUMN meter_unit text CHECK (meter_unit IS NULL OR meter_unit IN ('token', 'second', 'minute', 'micro-usdc')),
  ADD COLUMN unit_price bigint CHECK (unit_price IS NULL OR unit_price >= 0),
  ADD COLUMN max_units bigint CHECK (max_units IS NULL OR max_units > 0),
  ADD COLUMN units_used bigint CHECK (units_used IS NULL OR units_used >= 0),
  ADD COLUMN usage_capped boolean,
  ADD COLUMN usage_reported bigint,
  ADD COLUMN quote bigint CHECK (quote IS NULL OR quote >= 0),
  ADD COLUMN remainder_to text CHECK (remainder_to IS NULL OR remainder_to IN ('chain', 'credit'));

-- One per remainder going back on chain: a metered call's unused authorisation, or a payer's credit withdrawal. Each is
-- an EIP-3009 transferWithAuthorization from the treasury to the payer whose nonce is fixed at creation, so however
-- often it is sent it pays at most once; many go in one SettlementBatcher transaction.
CREATE TABLE remainders (
  id text PRIMARY KEY,
  execution_id text UNIQUE REFERENCES executions (id),
  payment_id text REFERENCES payments (id),
  to_address text NOT NULL,
  amount bigint NOT NULL CHECK (amount > 0),
  source text NOT NULL CHECK (source IN ('metered', 'credit_withdrawal')),
  status text NOT NULL CHECK (status IN ('pending', 'submitted', 'confirmed', 'void')),
  auth_nonce text NOT NULL UNIQUE,
  treasury_tx_id text,
  tx_hash text,
  block_number bigint,
  last_error text,
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  created_at timestamptz NOT NULL DEFAULT now(),
  confirmed_at timestamptz
);
CREATE INDEX remainders_unfinished ON remainders (next_attempt_at) WHERE status IN ('pending', 'submitted');
CREATE INDEX remainders_tx ON remainders (treasury_tx_id) WHERE treasury_tx_id IS NOT NULL;

-- Payers' credits are liability accounts `credit:<wallet lower-case>` opened on first use.
INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('remainders_payable', 'liability', 'Unused authorisations of metered calls (and credit withdrawals) owed back to payers on chain');

-- The payer's signed credit withdrawals: a withdrawal must be signed later than the last (no replay).
CREATE TABLE credit_withdrawals (
  wallet text PRIMARY KEY,
  last_signed_at_ms bigint NOT NULL
);

ALTER TABLE treasury_txs DROP CONSTRAINT treasury_txs_purpose_check;
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_purpose_check
  CHECK (purpose IN ('settlement', 'settlement_batch', 'refund', 'gap_fill', 'withdrawal', 'account_deploy', 'remainder_batch'));
