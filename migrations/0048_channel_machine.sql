-- The channel machine on the machine host (machines/channel.ts, services/channels/channelSpec.ts; docs/settlement.md
-- "Channels: the machine"). A payer who starts a withdrawal leaves us until finalizable_at to claim what is charged:
-- claim_due_at is when the claims worker must claim the channel (its durable timer), claimed_on_chain the contract's
-- totalClaimed as the last landed claim set it. Charges that were never claimed on chain when the payer's money left
-- are written off: channel_losses (an expense of the platform) takes them from the receivable.
ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_check;
ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check CHECK (kind IN ('asset', 'liability', 'revenue', 'equity', 'expense'));
INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('channel_losses', 'expense', 'Charged against batch-settlement channels but never claimed before the payer''s money left the channel');

ALTER TABLE channels ADD COLUMN claim_due_at timestamptz;
ALTER TABLE channels ADD COLUMN finalizable_at timestamptz;
ALTER TABLE channels ADD COLUMN claimed_on_chain bigint NOT NULL DEFAULT 0 CHECK (claimed_on_chain >= 0);
ALTER TABLE channels ADD COLUMN written_off bigint NOT NULL DEFAULT 0 CHECK (written_off >= 0);
ALTER TABLE channels ADD CONSTRAINT channels_written_off_within_charged CHECK (written_off <= charged_cumulative);
CREATE INDEX channels_claim_due ON channels (claim_due_at) WHERE claim_due_at IS NOT NULL;
-- "Needs attention" lists failed claims and withdrawing channels (services/operator/attentionQueries.ts).
CREATE INDEX channels_attention ON channels (updated_at) WHERE status IN ('claimFailed', 'withdrawing');

ALTER TABLE channel_charges DROP CONSTRAINT channel_charges_status_check;
ALTER TABLE channel_charges ADD CONSTRAINT channel_charges_status_check CHECK (status IN ('charged', 'returned', 'claimed', 'written_off'));

-- A deposit is sent once per ERC-3009 nonce (the treasury transaction's subject): the request that sent it, or the
-- treasury worker after a crash, delivers its inclusion to the channel.
CREATE TABLE channel_deposits (
  nonce text PRIMARY KEY CHECK (nonce ~ '^0x[0-9a-f]{64}$'),
  channel_id text NOT NULL REFERENCES channels (id),
  amount bigint NOT NULL CHECK (amount > 0),
  treasury_tx_id text,
  status text NOT NULL CHECK (status IN ('sending', 'included', 'failed')),
  failure_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX channel_deposits_channel ON channel_deposits (channel_id, created_at);
