-- Issue 24 #5: a payout to an address other than the agent's registered wallet needs an EIP-712 authorization signed
-- by that wallet over agent, amount, destination, nonce and deadline (services/withdrawals/PayoutAuthorization.ts). Its
-- nonce is kept on the withdrawal it paid for; the unique index makes each authorization pay once, also under
-- concurrent requests (the second insert fails: AUTH_SIGNATURE_REUSED).
ALTER TABLE withdrawals ADD COLUMN authorization_nonce text CHECK (authorization_nonce ~ '^0x[0-9a-f]{64}$');
CREATE UNIQUE INDEX withdrawals_authorization_nonce ON withdrawals (agent_id, authorization_nonce) WHERE authorization_nonce IS NOT NULL;
