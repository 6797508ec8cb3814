-- Which chain this database belongs to, per network the deployment takes payments on (layers/chainIdentity.ts): recorded
-- at the first start on that network, compared at every later start, before anything is sent. A database used with
-- another chain (a new devnet, another RPC) makes the start refuse: its nonces, balances and transactions are that chain's.
CREATE TABLE chain_identities (
  network text PRIMARY KEY,
  is_primary boolean NOT NULL,
  chain_id bigint NOT NULL CHECK (chain_id > 0),
  genesis_hash text NOT NULL,
  usdc_address text NOT NULL,
  batcher_address text,
  recorded_at timestamptz NOT NULL DEFAULT now()
);
-- One primary network per database.
CREATE UNIQUE INDEX chain_identities_one_primary ON chain_identities (is_primary) WHERE is_primary;
