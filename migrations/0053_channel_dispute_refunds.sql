-- A dispute resolved for the client on a channel-paid call (docs/settlement.md "Disputes on channel calls"): while no
-- claim has taken the call's charge, the client's share comes off the kept charge and off the channel's charged total
-- (the payer's channel balance keeps the money, the next claim takes less); a charge a claim already took is refunded
-- to the payer's wallet; a charge written off (the payer's money left unclaimed) was never ours to refund.
ALTER TABLE channel_charges ADD COLUMN refunded_amount bigint NOT NULL DEFAULT 0 CHECK (refunded_amount >= 0);

-- Where the client's share `p_amount` of the call `p_request` goes, under the channel row's lock (held to the end of
-- the caller's transaction, so a claim cannot take the charge between this answer and the refund):
--   'channel'      the charge is kept and unclaimed, and covers the share; with p_apply the share is taken off the
--                  charge (kept_amount lowered, 'returned' at zero) and off the channel's charged_cumulative;
--   'claimed'      a claim took the charge (its money is the receiver's on chain): the wallet refund;
--   'written_off'  the payer's money left the channel before any claim took the charge;
--   'not_kept'     the call is still running, or its charge was given back; 'short': the kept charge is below the
--                  share (a metered call's record and the dispute disagree); 'unknown': the call charged no channel.
CREATE FUNCTION channel_dispute_refund(p_request text, p_amount bigint, p_apply boolean)
RETURNS TABLE (outcome text, kept bigint, charged_cumulative bigint)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  target text;
  cc channel_charges%ROWTYPE;
  after bigint;
BEGIN
  IF p_amount <= 0 THEN
    RAISE EXCEPTION 'channel_dispute_refund: % is not a refund', p_amount;
  END IF;
  SELECT c.channel_id INTO target FROM channel_charges c WHERE c.request_id = p_request;
  IF NOT FOUND THEN
    RETURN QUERY SELECT 'unknown'::text, 0::bigint, NULL::bigint;
    RETURN;
  END IF;
  SELECT c.charged_cumulative INTO after FROM channels c WHERE c.id = target FOR UPDATE;
  SELECT * INTO cc FROM channel_charges c WHERE c.request_id = p_request FOR UPDATE;
  IF cc.status IN ('claimed', 'written_off') THEN
    RETURN QUERY SELECT cc.status, COALESCE(cc.kept_amount, cc.amount), after;
    RETURN;
  END IF;
  IF cc.status <> 'kept' THEN
    RETURN QUERY SELECT 'not_kept'::text, 0::bigint, after;
    RETURN;
  END IF;
  IF cc.kept_amount < p_amount THEN
    RETURN QUERY SELECT 'short'::text, cc.kept_amount, after;
    RETURN;
  END IF;
  IF NOT p_apply THEN
    RETURN QUERY SELECT 'channel'::text, cc.kept_amount, after;
    RETURN;
  END IF;
  UPDATE channel_charges c SET kept_amount = cc.kept_amount - p_amount, refunded_amount = c.refunded_amount + p_amount,
                               status = CASE WHEN cc.kept_amount = p_amount THEN 'returned' ELSE 'kept' END,
                               returned_at = CASE WHEN cc.kept_amount = p_amount THEN now() ELSE c.returned_at END
    WHERE c.request_id = p_request;
  UPDATE channels c SET charged_cumulative = c.charged_cumulative - p_amount, updated_at = now()
    WHERE c.id = target RETURNING c.charged_cumulative INTO after;
  RETURN QUERY SELECT 'channel'::text, cc.kept_amount - p_amount, after;
END
$$;
