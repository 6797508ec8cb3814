-- A treasury transaction re-signed with higher fees (same nonce) keeps one row: raw_tx/tx_hash are the newest bytes,
-- replaced_hashes the earlier ones, any of which may still be the one mined.
ALTER TABLE treasury_txs ADD COLUMN replaced_hashes text[] NOT NULL DEFAULT '{}';
