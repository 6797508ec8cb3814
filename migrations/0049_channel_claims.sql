-- Claims, settles and cooperative refunds of batch-settlement channels, and the watch of payers' withdrawals
-- (services/channels/Claims.ts, Refunds.ts, WithdrawWatch.ts; docs/settlement.md "Claims, settles and refunds").
--
-- A claim submits the channel's whole config (the contract hashes it into the channel id), so the row keeps the two
-- parts of it that only the payer's payload named: the salt and the receiver authorizer the channel was opened with.
ALTER TABLE channels ADD COLUMN salt text CHECK (salt ~ '^0x[0-9a-f]{64}$');
ALTER TABLE channels ADD COLUMN receiver_authorizer text CHECK (receiver_authorizer ~ '^0x[0-9a-f]{40}$');
-- The claim (or refund) transaction carrying the channel's claim now, and when a claim the contract refused may be
-- sent again. (claimed_on_chain, the chain's totalClaimed as landed claims set it, and claim_due_at, a withdrawal's
-- claim due at once, are the machine's: migration 0048.) claimed_cumulative above claimed_on_chain is a claim still to land.
ALTER TABLE channels ADD COLUMN claim_tx_id text;
ALTER TABLE channels ADD COLUMN claim_next_at timestamptz;
-- Settled money was claimed on chain first.
ALTER TABLE channels ADD CONSTRAINT channels_settled_on_chain_check CHECK (settled_cumulative <= claimed_on_chain);
CREATE INDEX channels_claimable ON channels (network) WHERE claim_tx_id IS NULL AND status IN ('open', 'withdrawing', 'claimFailed');

-- One row per channel a claim transaction carries: the totalClaimed it submits for it.
CREATE TABLE channel_claim_items (
  treasury_tx_id text NOT NULL,
  channel_id text NOT NULL REFERENCES channels (id),
  total_claimed bigint NOT NULL CHECK (total_claimed > 0),
  PRIMARY KEY (treasury_tx_id, channel_id)
);
CREATE INDEX channel_claim_items_channel ON channel_claim_items (channel_id);

-- One row per channel whose claimed money a settle transaction moves to the treasury: claimed_on_chain − settled_cumulative
-- when the settle was built (no claim of the network in flight then, so the contract's claimed-unsettled pool is exactly
-- the sum of these). booked: the amount reached the treasury and the channel's machine booked it (SETTLED).
CREATE TABLE channel_settle_items (
  treasury_tx_id text NOT NULL,
  channel_id text NOT NULL REFERENCES channels (id),
  amount bigint NOT NULL CHECK (amount > 0),
  booked boolean NOT NULL DEFAULT false,
  PRIMARY KEY (treasury_tx_id, channel_id)
);
CREATE INDEX channel_settle_items_open ON channel_settle_items (treasury_tx_id) WHERE NOT booked;

-- Cooperative refunds: one row per refund transaction (its claim of what was charged goes in the same transaction).
CREATE TABLE channel_refunds (
  treasury_tx_id text PRIMARY KEY,
  channel_id text NOT NULL REFERENCES channels (id),
  -- NULL: everything unclaimed.
  amount_asked bigint CHECK (amount_asked > 0),
  refund_nonce numeric(78, 0) NOT NULL,
  -- The totalClaimed the transaction's claim submits (NULL: no claim in it).
  total_claimed bigint,
  status text NOT NULL CHECK (status IN ('submitted', 'refunded', 'failed')),
  refunded bigint CHECK (refunded >= 0),
  balance_after bigint CHECK (balance_after >= 0),
  created_at timestamptz NOT NULL DEFAULT now(),
  resolved_at timestamptz
);
CREATE INDEX channel_refunds_channel ON channel_refunds (channel_id);

-- The withdrawal watch's place in each network's logs: the next block to read.
CREATE TABLE channel_watch_cursors (
  network text PRIMARY KEY,
  next_block bigint NOT NULL CHECK (next_block >= 0),
  updated_at timestamptz NOT NULL DEFAULT now()
);
