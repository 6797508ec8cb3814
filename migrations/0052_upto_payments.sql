-- x402 `upto` pays for metered calls (docs/settlement.md "Upto: a metered maximum through Permit2"). The payer signs a
-- Permit2 witness transfer of at most the capability's maximum to the x402UptoPermit2Proxy, naming our treasury as
-- receiver and our treasury writer as the one facilitator allowed to settle it. Its payment row (purpose 'upto')
-- holds the maximum in `amount` (the payer's unsettled payments count it until it settles), the Permit2 nonce as a
-- 32-byte hex in `nonce` (the (asset, payer, nonce) key refuses a second use of one authorization) and the deadline in
-- `valid_before` (capped at 2^62: what the unsettled sum compares; the signed values are kept whole in
-- `upto_permitted` and `upto_deadline`, uint256 in decimal, for the settle call). Once the call is over, `upto_charged` is what it used: the treasury writer settles exactly that
-- ('upto_settle'), or nothing at all for a call that failed or used nothing.
ALTER TABLE payments DROP CONSTRAINT payments_purpose_check;
ALTER TABLE payments ADD CONSTRAINT payments_purpose_check CHECK (purpose IN ('registration', 'execution', 'chain', 'credit', 'channel', 'upto'));
ALTER TABLE payments ADD COLUMN upto_charged bigint CHECK (upto_charged >= 0 AND upto_charged <= amount);
ALTER TABLE payments ADD COLUMN upto_permitted numeric(78, 0) CHECK (upto_permitted >= amount);
ALTER TABLE payments ADD COLUMN upto_deadline numeric(78, 0);
ALTER TABLE payments ADD CONSTRAINT payments_upto_columns_only_upto CHECK (purpose = 'upto' OR (upto_charged IS NULL AND upto_permitted IS NULL AND upto_deadline IS NULL));
-- A metered call paid by upto: the maximum it did not use is never collected (it goes back to settlement receivable).
ALTER TABLE executions DROP CONSTRAINT IF EXISTS executions_remainder_to_check;
ALTER TABLE executions ADD CONSTRAINT executions_remainder_to_check CHECK (remainder_to IS NULL OR remainder_to IN ('chain', 'credit', 'channel', 'upto'));
ALTER TABLE treasury_txs DROP CONSTRAINT treasury_txs_purpose_check;
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_purpose_check
  CHECK (purpose IN ('settlement', 'settlement_batch', 'refund', 'gap_fill', 'withdrawal', 'account_deploy', 'remainder_batch',
                     'channel_deposit', 'channel_claim', 'channel_settle', 'channel_refund', 'upto_settle'));
-- The upto payments whose call is over and whose settlement is not recorded yet: what the upto recovery pass reads.
CREATE INDEX payments_upto_open ON payments (next_attempt_at) WHERE purpose = 'upto' AND status IN ('reserved', 'retrying');
