-- A payer's payments that are accepted but not settled yet count against its balance (docs/security.md "Unsettled
-- payments and counterfactual accounts"). The reservation of an x402 payment inserts its row only through
-- `payer_funds_cover`, in the same statement: nothing reserved, nothing counted when it refuses.

-- The payments still to settle, per payer: what the sum below reads (settled and failed rows leave the index).
CREATE INDEX payments_unsettled_by_payer ON payments (payer, network) WHERE status IN ('reserved', 'retrying');

-- Whether the payer's balance as the chain showed it at verification (`p_balance`) covers this payment and every
-- payment of the payer on that network and asset that is reserved or retrying and still valid (an authorization past
-- its validBefore can no longer move money). Refuses with SQLSTATE PF402 (DETAIL: a JSON object with the balance,
-- the unsettled sum and the amount). Concurrent reservations of one payer queue on a transaction-scoped advisory
-- lock; PL/pgSQL takes a fresh snapshot for the sum after it, so each sees the rows the previous ones committed.
CREATE FUNCTION payer_funds_cover(p_payer text, p_network text, p_asset text, p_amount bigint, p_balance numeric, p_now_seconds bigint)
RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  unsettled numeric;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended('payer-funds:' || p_network || ':' || p_payer, 0));
  SELECT COALESCE(SUM(amount), 0) INTO unsettled FROM payments
    WHERE payer = p_payer AND network = p_network AND asset = p_asset
      AND status IN ('reserved', 'retrying') AND valid_before > p_now_seconds;
  IF unsettled + p_amount > p_balance THEN
    RAISE EXCEPTION 'the payer''s balance does not cover this payment and its payments not settled yet' USING ERRCODE = 'PF402',
      DETAIL = json_build_object('balance', p_balance::text, 'unsettled', unsettled::text, 'amount', p_amount::text)::text;
  END IF;
  RETURN true;
END
$$;

-- A counterfactual (ERC-6492) account is deployed at most once: its deployment transaction's subject is now the account
-- (its lowercase address; rows written before name the payment), and one account has at most one deployment in flight
-- per network, across processes (services/payments/AccountDeployer.ts).
CREATE UNIQUE INDEX treasury_txs_one_live_deploy ON treasury_txs (network, subject_id)
  WHERE purpose = 'account_deploy' AND state IN ('signed', 'broadcast');
