-- Wallet signatures are single-use: each (agent, wallet, signed timestamp) authorises one change, remembered until the
-- signature would have expired anyway. Keyed on the signed message, not the signature bytes (ECDSA signatures are malleable).
CREATE TABLE used_wallet_signatures (
  agent_id text NOT NULL,
  wallet text NOT NULL,
  signed_at_ms bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (agent_id, wallet, signed_at_ms)
);
CREATE INDEX used_wallet_signatures_expiry ON used_wallet_signatures (expires_at);
