-- x402 batch-settlement channels whose receiver is our treasury (docs/settlement.md "Channels: state and charges").
-- The row mirrors the contract's channel (config, balance, totalClaimed) and holds what only we know: how much the
-- payer's vouchers have let us charge (charged_cumulative) and the latest voucher, which is what a claim submits. The
-- lifecycle is machines/channel.ts; charges are the one-statement compare-and-set `channel_charge` below.
CREATE TABLE channels (
  id text PRIMARY KEY CHECK (id ~ '^0x[0-9a-f]{64}$'),
  network text NOT NULL,
  payer text NOT NULL CHECK (payer ~ '^0x[0-9a-f]{40}$'),
  payer_authorizer text NOT NULL CHECK (payer_authorizer ~ '^0x[0-9a-f]{40}$'),
  receiver text NOT NULL CHECK (receiver ~ '^0x[0-9a-f]{40}$'),
  token text NOT NULL CHECK (token ~ '^0x[0-9a-f]{40}$'),
  withdraw_delay integer NOT NULL CHECK (withdraw_delay > 0),
  -- The channel's on-chain balance (deposits less refunds and withdrawals), as last read from the chain.
  balance bigint NOT NULL DEFAULT 0 CHECK (balance >= 0),
  -- What vouchers have let us charge, less returned charges; claimed: what claims took (or are taking) on chain;
  -- settled: what settles moved to the treasury.
  charged_cumulative bigint NOT NULL DEFAULT 0 CHECK (charged_cumulative >= 0),
  claimed_cumulative bigint NOT NULL DEFAULT 0 CHECK (claimed_cumulative >= 0),
  settled_cumulative bigint NOT NULL DEFAULT 0 CHECK (settled_cumulative >= 0),
  -- The latest accepted voucher: its cumulative ceiling covers everything charged, so a claim of charged_cumulative
  -- (totalClaimed ≤ maxClaimableAmount) can always use it.
  voucher_max_claimable bigint CHECK (voucher_max_claimable >= 0),
  voucher_signature text CHECK (voucher_signature ~ '^0x[0-9a-f]+$'),
  status text NOT NULL CHECK (status IN ('depositPending', 'open', 'withdrawing', 'claimFailed', 'drained', 'closed', 'depositFailed')),
  machine_snapshot jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (charged_cumulative <= balance),
  CHECK (claimed_cumulative <= charged_cumulative),
  CHECK (settled_cumulative <= claimed_cumulative),
  CHECK ((voucher_max_claimable IS NULL) = (voucher_signature IS NULL)),
  CHECK (voucher_max_claimable >= charged_cumulative OR (voucher_max_claimable IS NULL AND charged_cumulative = 0))
);
CREATE INDEX channels_payer ON channels (payer, network);
CREATE INDEX channels_to_claim ON channels (status) WHERE status IN ('open', 'withdrawing', 'claimFailed');

-- One row per charge: what a paid call took from a channel. 'returned' when the call failed or timed out and the
-- charge was given back before any claim took it; 'claimed' once a claim covering it was built.
CREATE TABLE channel_charges (
  request_id text PRIMARY KEY,
  channel_id text NOT NULL REFERENCES channels (id),
  amount bigint NOT NULL CHECK (amount > 0),
  -- The channel's charged_cumulative right after this charge.
  cumulative_after bigint NOT NULL CHECK (cumulative_after >= amount),
  voucher_max_claimable bigint NOT NULL,
  status text NOT NULL CHECK (status IN ('charged', 'returned', 'claimed')),
  created_at timestamptz NOT NULL DEFAULT now(),
  returned_at timestamptz
);
CREATE INDEX channel_charges_unclaimed ON channel_charges (channel_id) WHERE status = 'charged';

-- Charged by vouchers, not yet claimed or settled: the channel's receivable (claims and settles move it to the treasury).
INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('channel_receivable', 'asset', 'Charged against payers'' batch-settlement channels, not yet settled to the treasury');

-- The charge of one paid call against a channel, in one statement (it can be the main query of the call's reservation
-- statement). Under the channel row's lock it answers, as one row (outcome, charged_cumulative, balance,
-- voucher_max_claimable):
--   'replayed'          the request id was charged already: its first outcome, nothing charged again;
--   'request_conflict'  the request id belongs to a charge of another channel or amount;
--   'unknown_channel' / 'not_open' / 'invalid_amount' (≤ 0)  nothing charged;
--   'stale'             charged_cumulative ≠ p_expected: the current state, for the corrective 402;
--   'voucher_short'     p_expected + p_amount > the voucher's ceiling;
--   'over_balance'      p_expected + p_amount > the channel's balance;
--   'charged'           the channel's charged_cumulative is now p_expected + p_amount and the voucher is stored.
-- Only a charge writes: a refused attempt leaves nothing, so a replay of it is judged again on the row as it then is.
CREATE FUNCTION channel_charge(p_channel text, p_request text, p_amount bigint, p_max_claimable bigint,
                               p_signature text, p_expected bigint)
RETURNS TABLE (outcome text, charged_cumulative bigint, balance bigint, voucher_max_claimable bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  ch channels%ROWTYPE;
  prior channel_charges%ROWTYPE;
BEGIN
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel FOR UPDATE;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'unknown_channel'::text, NULL::bigint, NULL::bigint, NULL::bigint;
    RETURN;
  END IF;
  -- Under the lock, a fresh snapshot: a replay that queued behind its first attempt sees that attempt's row.
  SELECT * INTO prior FROM channel_charges cc WHERE cc.request_id = p_request;
  IF FOUND THEN
    RETURN QUERY SELECT CASE WHEN prior.channel_id = p_channel AND prior.amount = p_amount THEN 'replayed' ELSE 'request_conflict' END,
      ch.charged_cumulative, ch.balance, ch.voucher_max_claimable;
    RETURN;
  END IF;
  IF p_amount <= 0 THEN
    RETURN QUERY SELECT 'invalid_amount'::text, ch.charged_cumulative, ch.balance, ch.voucher_max_claimable;
  ELSIF ch.status <> 'open' THEN
    RETURN QUERY SELECT 'not_open'::text, ch.charged_cumulative, ch.balance, ch.voucher_max_claimable;
  ELSIF ch.charged_cumulative <> p_expected THEN
    RETURN QUERY SELECT 'stale'::text, ch.charged_cumulative, ch.balance, ch.voucher_max_claimable;
  ELSIF p_expected + p_amount > p_max_claimable THEN
    RETURN QUERY SELECT 'voucher_short'::text, ch.charged_cumulative, ch.balance, ch.voucher_max_claimable;
  ELSIF p_expected + p_amount > ch.balance THEN
    RETURN QUERY SELECT 'over_balance'::text, ch.charged_cumulative, ch.balance, ch.voucher_max_claimable;
  ELSE
    -- The same request id charged on another channel at this very moment holds the key: that one is the charge.
    INSERT INTO channel_charges (request_id, channel_id, amount, cumulative_after, voucher_max_claimable, status)
      VALUES (p_request, p_channel, p_amount, p_expected + p_amount, p_max_claimable, 'charged')
      ON CONFLICT (request_id) DO NOTHING;
    IF NOT FOUND THEN
      RETURN QUERY SELECT 'request_conflict'::text, ch.charged_cumulative, ch.balance, ch.voucher_max_claimable;
      RETURN;
    END IF;
    UPDATE channels c SET charged_cumulative = p_expected + p_amount, voucher_max_claimable = p_max_claimable,
                          voucher_signature = p_signature, updated_at = now()
      WHERE c.id = p_channel;
    RETURN QUERY SELECT 'charged'::text, p_expected + p_amount, ch.balance, p_max_claimable;
  END IF;
END
$$;

-- A failed or timed-out call gives its charge back, unless a claim took it already: under the channel row's lock (the
-- order every channel statement takes: channel, then its charges), 'returned' lowers charged_cumulative by the charge
-- once; 'already_returned', 'claimed' (refused: the claim covers it) and 'unknown' change nothing. The stored voucher
-- stays: its ceiling still covers the lowered cumulative, and the payer's next voucher is signed over the lowered one.
CREATE FUNCTION channel_return_charge(p_request text)
RETURNS TABLE (outcome text, charged_cumulative bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  target text;
  taken bigint;
  after bigint;
BEGIN
  SELECT cc.channel_id INTO target FROM channel_charges cc WHERE cc.request_id = p_request;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'unknown'::text, NULL::bigint;
    RETURN;
  END IF;
  PERFORM 1 FROM channels c WHERE c.id = target FOR UPDATE;
  UPDATE channel_charges cc SET status = 'returned', returned_at = now()
    WHERE cc.request_id = p_request AND cc.status = 'charged' RETURNING cc.amount INTO taken;
  IF taken IS NULL THEN
    RETURN QUERY SELECT CASE cc.status WHEN 'returned' THEN 'already_returned' ELSE 'claimed' END, c.charged_cumulative
      FROM channel_charges cc JOIN channels c ON c.id = cc.channel_id WHERE cc.request_id = p_request;
    RETURN;
  END IF;
  UPDATE channels c SET charged_cumulative = c.charged_cumulative - taken, updated_at = now()
    WHERE c.id = target RETURNING c.charged_cumulative INTO after;
  RETURN QUERY SELECT 'returned'::text, after;
END
$$;

-- The claim of a channel is built: everything charged so far is claimed from now on (its charges can no longer be
-- returned) and the answer is what the claim submits: totalClaimed = charged_cumulative with the stored voucher.
-- No row when there is nothing new to claim.
CREATE FUNCTION channel_claim(p_channel text)
RETURNS TABLE (total_claimed bigint, voucher_max_claimable bigint, voucher_signature text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  ch channels%ROWTYPE;
BEGIN
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel FOR UPDATE;
  IF NOT FOUND OR ch.charged_cumulative = ch.claimed_cumulative THEN
    RETURN;
  END IF;
  UPDATE channel_charges cc SET status = 'claimed' WHERE cc.channel_id = p_channel AND cc.status = 'charged';
  UPDATE channels c SET claimed_cumulative = ch.charged_cumulative, updated_at = now() WHERE c.id = p_channel;
  RETURN QUERY SELECT ch.charged_cumulative, ch.voucher_max_claimable, ch.voucher_signature;
END
$$;
