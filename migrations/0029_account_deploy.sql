-- Payers with counterfactual (ERC-6492) smart accounts: before their payment settles, the treasury deploys the account
-- through its factory (an allowed one, X402_EIP6492_ALLOWED_FACTORIES). That transaction's purpose is 'account_deploy'
-- and its subject the payment; it moves no USDC.
ALTER TABLE treasury_txs DROP CONSTRAINT treasury_txs_purpose_check;
ALTER TABLE treasury_txs ADD CONSTRAINT treasury_txs_purpose_check
  CHECK (purpose IN ('settlement', 'settlement_batch', 'refund', 'gap_fill', 'withdrawal', 'account_deploy'));
