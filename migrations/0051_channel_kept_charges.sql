-- A channel charge is claimable only once its call is over (docs/settlement.md "Channels: state and charges"): the
-- paid call's record transaction keeps it ('kept', lowered to what a metered call used) or returns it, and a claim
-- takes kept charges only, so a call still running can always give its charge back. Vouchers are cumulative and
-- charges add up, so any claim between what was claimed and what is charged is covered by the stored voucher.
ALTER TABLE channel_charges DROP CONSTRAINT channel_charges_status_check;
ALTER TABLE channel_charges ADD CONSTRAINT channel_charges_status_check CHECK (status IN ('charged', 'kept', 'returned', 'claimed', 'written_off'));
ALTER TABLE channel_charges ADD COLUMN kept_amount bigint CHECK (kept_amount >= 0);
DROP INDEX channel_charges_unclaimed;
CREATE INDEX channel_charges_unclaimed ON channel_charges (channel_id) WHERE status IN ('charged', 'kept');

-- The call is over and keeps `p_keep` of its charge (≤ the charge; a metered call's use): the rest goes back to the
-- channel (charged_cumulative lowered), all of it when p_keep = 0 ('returned'). Under the channel row's lock, once:
-- a second call answers 'already' with the first outcome's figures. 'unknown' when the request charged nothing.
CREATE FUNCTION channel_keep_charge(p_request text, p_keep bigint)
RETURNS TABLE (outcome text, kept bigint, given_back bigint, charged_cumulative bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  target text;
  cc channel_charges%ROWTYPE;
  back bigint;
  after bigint;
BEGIN
  SELECT c.channel_id INTO target FROM channel_charges c WHERE c.request_id = p_request;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'unknown'::text, 0::bigint, 0::bigint, NULL::bigint;
    RETURN;
  END IF;
  PERFORM 1 FROM channels c WHERE c.id = target FOR UPDATE;
  SELECT * INTO cc FROM channel_charges c WHERE c.request_id = p_request FOR UPDATE;
  IF cc.status <> 'charged' THEN
    RETURN QUERY SELECT 'already'::text, COALESCE(cc.kept_amount, CASE WHEN cc.status = 'returned' THEN 0 ELSE cc.amount END),
      CASE WHEN cc.status = 'returned' THEN cc.amount ELSE cc.amount - COALESCE(cc.kept_amount, cc.amount) END,
      (SELECT c.charged_cumulative FROM channels c WHERE c.id = target);
    RETURN;
  END IF;
  IF p_keep < 0 OR p_keep > cc.amount THEN
    RAISE EXCEPTION 'channel_keep_charge: % is not within the charge of %', p_keep, cc.amount;
  END IF;
  back := cc.amount - p_keep;
  UPDATE channel_charges c SET status = CASE WHEN p_keep = 0 THEN 'returned' ELSE 'kept' END, kept_amount = p_keep,
                               returned_at = CASE WHEN p_keep = 0 THEN now() ELSE NULL END
    WHERE c.request_id = p_request;
  UPDATE channels c SET charged_cumulative = c.charged_cumulative - back, updated_at = now()
    WHERE c.id = target RETURNING c.charged_cumulative INTO after;
  RETURN QUERY SELECT 'kept'::text, p_keep, back, after;
END
$$;

-- A failed call's charge back in full (kept 0), for callers of the older name.
CREATE OR REPLACE FUNCTION channel_return_charge(p_request text)
RETURNS TABLE (outcome text, charged_cumulative bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  r record;
  st text;
BEGIN
  SELECT c.status INTO st FROM channel_charges c WHERE c.request_id = p_request;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'unknown'::text, NULL::bigint;
    RETURN;
  END IF;
  IF st IN ('kept', 'claimed') THEN
    RETURN QUERY SELECT 'claimed'::text, (SELECT ch.charged_cumulative FROM channels ch JOIN channel_charges c ON c.channel_id = ch.id WHERE c.request_id = p_request);
    RETURN;
  END IF;
  SELECT * INTO r FROM channel_keep_charge(p_request, 0);
  RETURN QUERY SELECT CASE WHEN r.outcome = 'kept' THEN 'returned' ELSE 'already_returned' END, r.charged_cumulative;
END
$$;

-- The claim of a channel is built: the kept charges become claimed, and the answer is what the claim submits
-- (totalClaimed = what was claimed before plus the kept charges, with the stored voucher, whose ceiling covers
-- everything charged). Charges of calls still running stay out. No row when nothing is kept.
CREATE OR REPLACE FUNCTION channel_claim(p_channel text)
RETURNS TABLE (total_claimed bigint, voucher_max_claimable bigint, voucher_signature text)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  ch channels%ROWTYPE;
  taken bigint;
BEGIN
  SELECT * INTO ch FROM channels c WHERE c.id = p_channel FOR UPDATE;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  WITH t AS (
    UPDATE channel_charges cc SET status = 'claimed' WHERE cc.channel_id = p_channel AND cc.status = 'kept'
    RETURNING cc.kept_amount
  ) SELECT COALESCE(sum(t.kept_amount), 0) INTO taken FROM t;
  IF taken = 0 THEN
    RETURN;
  END IF;
  UPDATE channels c SET claimed_cumulative = ch.claimed_cumulative + taken, updated_at = now() WHERE c.id = p_channel;
  RETURN QUERY SELECT ch.claimed_cumulative + taken, ch.voucher_max_claimable, ch.voucher_signature;
END
$$;

-- A voucher's header is not a one-time credential as an EIP-3009 authorization is: after a failed call gave its charge
-- back, the payer's next voucher is over the same cumulative and, signed deterministically, is the very same header.
-- Channel payments are kept once by the channel's compare-and-set charge instead; the header stays their read-back
-- handle (several calls may share it).
DROP INDEX payments_header_key;
CREATE UNIQUE INDEX payments_header_key ON payments (header_sha256) WHERE purpose <> 'channel';
CREATE INDEX payments_channel_header ON payments (header_sha256) WHERE purpose = 'channel';
