-- Group-commit settlement: many payments settled by one treasury transaction through the SettlementBatcher contract.
-- The transaction's purpose is 'settlement_batch'; each payment in it points at it (payments.treasury_tx_id, linked in
-- the database transaction that stores the signed bytes), so the treasury worker finds a batch's payments after a crash.
ALTER TABLE treasury_txs DROP CONSTRAINT treasury_txs_purpose_check;
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_purpose_check
  CHECK (purpose IN ('settlement', 'settlement_batch', 'refund', 'gap_fill', 'withdrawal'));

CREATE INDEX payments_treasury_tx ON payments (treasury_tx_id) WHERE treasury_tx_id IS NOT NULL;
