-- Batch-settlement channels pay for calls (docs/settlement.md "Channels"). A call paid by a voucher has a payment row of
-- purpose 'channel', settled from the start: its money is the channel's receivable (charged in the reservation's
-- statement), collected by claims and settles. Its nonce column holds `channel id:cumulative after the charge`, so the
-- (asset, payer, nonce) unique index refuses a second payment at one point of a channel; a metered call's unused
-- maximum goes back to the channel ('channel'). The treasury writer sends the channels' transactions: deposits,
-- claims (many channels per transaction), settles and cooperative refunds.
ALTER TABLE payments DROP CONSTRAINT payments_purpose_check;
ALTER TABLE payments ADD CONSTRAINT payments_purpose_check CHECK (purpose IN ('registration', 'execution', 'chain', 'credit', 'channel'));
ALTER TABLE payments ADD COLUMN channel_id text REFERENCES channels (id);
ALTER TABLE executions DROP CONSTRAINT IF EXISTS executions_remainder_to_check;
ALTER TABLE executions ADD CONSTRAINT executions_remainder_to_check CHECK (remainder_to IS NULL OR remainder_to IN ('chain', 'credit', 'channel'));
ALTER TABLE treasury_txs DROP CONSTRAINT treasury_txs_purpose_check;
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_purpose_check
  CHECK (purpose IN ('settlement', 'settlement_batch', 'refund', 'gap_fill', 'withdrawal', 'account_deploy', 'remainder_batch',
                     'channel_deposit', 'channel_claim', 'channel_settle', 'channel_refund'));
