-- Which chain this database belongs to, per network the deployment takes payments on (layers/chainIdentity.ts): recorded
-- at the first start on that network, compared at every later start, before anything is sent. A database used with
-- another chain (a new devnet, another RPC) makes the start refuse: its nonces, balances and transactions are that chain's.
CREATE TABLE chain_identities (
  network text PRIMARY KEY,
  is_primary boolean NOT NULL,
  chain_id bigint NOT NULL CHECK (chain_id > 0),
  -- Block 1's hash (block 0's on a chain that has no block 1): it commits to the genesis block through its parent hash,
  -- and unlike block 0 it survives an anvil restart from saved state (anvil makes block 0 again at every load).
  anchor_block bigint NOT NULL CHECK (anchor_block IN (0, 1)),
  anchor_hash text NOT NULL,
  usdc_address text NOT NULL,
  batcher_address text,
  recorded_at timestamptz NOT NULL DEFAULT now()
);
-- One primary network per database.
CREATE UNIQUE INDEX chain_identities_one_primary ON chain_identities (is_primary) WHERE is_primary;
