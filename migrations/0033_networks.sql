-- Two networks in one deployment (docs/decisions.md "Two networks in one deployment"): every treasury transaction (a
-- settlement, a settlement batch, a refund, a gap fill, a payout) and every nonce row belongs to one network, so each
-- network has its own nonce sequence for the same treasury key. payments.network already names the payment's network.
-- '' marks rows written before networks existed: the primary network adopts them at start (TreasuryRepo.adoptLegacy),
-- since this migration cannot know which chain the deployment ran on.
ALTER TABLE treasury_txs DROP CONSTRAINT treasury_txs_signer_fkey;
ALTER TABLE treasury_signers ADD COLUMN network text NOT NULL DEFAULT '';
ALTER TABLE treasury_signers DROP CONSTRAINT treasury_signers_pkey;
ALTER TABLE treasury_signers ADD PRIMARY KEY (network, address);
ALTER TABLE treasury_txs ADD COLUMN network text NOT NULL DEFAULT '';
DROP INDEX treasury_txs_live_nonce;
CREATE UNIQUE INDEX treasury_txs_live_nonce ON treasury_txs (network, signer, nonce) WHERE state <> 'dropped';
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_signer_fkey FOREIGN KEY (network, signer) REFERENCES treasury_signers (network, address)
  ON UPDATE CASCADE;

-- A refund goes back on its payment's network (NULL: the primary, as for every refund before networks).
ALTER TABLE refunds ADD COLUMN network text;

-- The reconciliation compares each network's treasury with its own ledger account ('treasury' is the primary's,
-- 'treasury:<network>' another's, opened at start); '' is the primary.
ALTER TABLE treasury_reconciliations ADD COLUMN network text NOT NULL DEFAULT '';
DROP INDEX treasury_reconciliations_opening;
CREATE UNIQUE INDEX treasury_reconciliations_opening ON treasury_reconciliations (network, kind) WHERE kind = 'opening';
