-- The reconciliation of batch-settlement channels (services/treasury/ChannelReconciliation.ts; docs/operators.md
-- "Reconciling channels"): one row per network per check, beside the treasury's own (treasury_reconciliations).
--   receivable: the ledger's channel_receivable against Σ(charged − settled) over the rows (one account for every
--               network: the same figures on each network's row, checked in one database snapshot);
--   channels:   per channel still live, the contract's channels(id) against the row's balance mirror and claimed
--               cumulative at the network's last final block (claims in flight, ours ahead of the chain, counted apart);
--   pending:    the contract's receivers(treasury, USDC) claimed-unsettled against Σ(claimed − settled) less claims in
--               flight.
-- A check that disagrees is checked again later and `confirmed` when it still does: /metrics and /health read the
-- newest row per network.
CREATE TABLE channel_reconciliations (
  id bigserial PRIMARY KEY,
  network text NOT NULL,
  block_number bigint NOT NULL,
  ledger_receivable bigint NOT NULL,
  rows_receivable bigint NOT NULL,
  receivable_drift bigint NOT NULL,
  channels_checked integer NOT NULL CHECK (channels_checked >= 0),
  channels_drifted integer NOT NULL CHECK (channels_drifted >= 0),
  -- Σ(chain − ours) over the drifted channels: balances, then totalClaimed where the chain is ahead of us.
  balance_drift bigint NOT NULL,
  claimed_drift bigint NOT NULL,
  claims_in_flight bigint NOT NULL CHECK (claims_in_flight >= 0),
  chain_pending bigint NOT NULL,
  rows_pending bigint NOT NULL,
  pending_drift bigint NOT NULL,
  -- The drifted channels (at most 20: id, ours and the chain's balance and totalClaimed), for the operator.
  drifted jsonb NOT NULL DEFAULT '[]',
  confirmed boolean NOT NULL,
  checked_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX channel_reconciliations_newest ON channel_reconciliations (network, id DESC);
