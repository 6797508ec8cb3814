-- Finality: a treasury transaction is `mined` (included, booked) until CHAIN_CONFIRMATIONS blocks hold it, then
-- `confirmed`/`reverted`; a reorg before that makes it `reorged` until its stored bytes are included again.
ALTER TABLE treasury_txs DROP CONSTRAINT IF EXISTS treasury_txs_state_check;
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_state_check
  CHECK (state IN ('signed', 'broadcast', 'mined', 'reorged', 'confirmed', 'reverted', 'dropped'));
CREATE INDEX treasury_txs_not_final ON treasury_txs (nonce) WHERE state IN ('mined', 'reorged');

-- A transaction booked at one block and, after a reorg, included again at a later one: the ledger's transfers are
-- append-only, so the reconciliation reads the block it now is in from here (keyed by the hash that was mined).
CREATE TABLE chain_reinclusions (
  tx_hash text PRIMARY KEY CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
  block_number bigint NOT NULL CHECK (block_number >= 0),
  recorded_at timestamptz NOT NULL DEFAULT now()
);
