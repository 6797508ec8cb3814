-- Issue 28 #4: a payer wallet's spending limits (services/limits, docs/clients.md "Spending limits"). The check runs
-- inside the paid call's one reservation statement (`spend_within_limits` below), so it is atomic with the reservation
-- and costs a payer without limits no extra round trip (one index probe of payer_limits in the same statement).

-- One row per payer that ever registered limits. "Removed" limits leave the row with every limit NULL: its signed
-- timestamp stays, so an older signed request cannot be replayed (each change must be signed later than the last).
CREATE TABLE payer_limits (
  payer text PRIMARY KEY CHECK (payer ~ '^0x[0-9a-f]{40}$'),
  per_call_max bigint CHECK (per_call_max > 0),
  per_day_max bigint CHECK (per_day_max > 0),
  per_agent_per_day_max bigint CHECK (per_agent_per_day_max > 0),
  allowed_agents text[] CHECK (allowed_agents IS NULL OR cardinality(allowed_agents) BETWEEN 1 AND 100),
  signed_at_ms bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- What a payer with limits spent per UTC day: agent_id '' is the day's total, an agent id that agent's share.
CREATE TABLE payer_spending (
  payer text NOT NULL,
  day date NOT NULL,
  agent_id text NOT NULL,
  spent bigint NOT NULL CHECK (spent >= 0),
  PRIMARY KEY (payer, day, agent_id)
);

-- Each payment counted against limits (only payers with limits get a row): what a refund gives back, and to which day.
CREATE TABLE limit_spends (
  payment_id text PRIMARY KEY,
  payer text NOT NULL,
  agent_id text NOT NULL,
  day date NOT NULL,
  amount bigint NOT NULL CHECK (amount > 0)
);

-- A refund gives its amount back to the day its payment was counted in, once per refund (one per execution, one per
-- chain's unspent budget, as refunds themselves).
CREATE TABLE limit_restorations (
  payment_id text NOT NULL,
  source text NOT NULL,
  amount bigint NOT NULL CHECK (amount >= 0),
  PRIMARY KEY (payment_id, source)
);

-- Counts a payment against its payer's limits or refuses it (SQLSTATE SL402, DETAIL a JSON object naming the limit).
-- false: the payer has no limits (nothing counted, nothing recorded); true: counted. The counters' upserts take the
-- row lock, so concurrent payments of one payer queue on it and each sees the sum the previous ones left: no two
-- payments slip past a daily limit together.
CREATE FUNCTION spend_within_limits(p_payer text, p_agent text, p_amount bigint, p_day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  l payer_limits%ROWTYPE;
  counted int;
  spent_now bigint;
BEGIN
  SELECT * INTO l FROM payer_limits WHERE payer = p_payer;
  IF NOT FOUND OR (l.per_call_max IS NULL AND l.per_day_max IS NULL AND l.per_agent_per_day_max IS NULL AND l.allowed_agents IS NULL) THEN
    RETURN false;
  END IF;
  IF l.allowed_agents IS NOT NULL AND NOT (p_agent = ANY (l.allowed_agents)) THEN
    RAISE EXCEPTION 'the payer''s spending limits do not allow this agent' USING ERRCODE = 'SL402',
      DETAIL = json_build_object('limit', 'allowedAgents', 'agentId', p_agent, 'allowedAgents', l.allowed_agents)::text;
  END IF;
  IF l.per_call_max IS NOT NULL AND p_amount > l.per_call_max THEN
    RAISE EXCEPTION 'the call costs more than the payer''s per-call limit' USING ERRCODE = 'SL402',
      DETAIL = json_build_object('limit', 'perCallMax', 'max', l.per_call_max::text, 'amount', p_amount::text)::text;
  END IF;
  counted := 0;
  IF l.per_day_max IS NULL OR p_amount <= l.per_day_max THEN
    INSERT INTO payer_spending AS s (payer, day, agent_id, spent) VALUES (p_payer, p_day, '', p_amount)
      ON CONFLICT (payer, day, agent_id) DO UPDATE SET spent = s.spent + EXCLUDED.spent
      WHERE l.per_day_max IS NULL OR s.spent + EXCLUDED.spent <= l.per_day_max;
    GET DIAGNOSTICS counted = ROW_COUNT;
  END IF;
  IF counted = 0 THEN
    SELECT spent INTO spent_now FROM payer_spending WHERE payer = p_payer AND day = p_day AND agent_id = '';
    RAISE EXCEPTION 'the call would exceed the payer''s daily limit' USING ERRCODE = 'SL402',
      DETAIL = json_build_object('limit', 'perDayMax', 'max', l.per_day_max::text, 'spent', coalesce(spent_now, 0)::text, 'amount', p_amount::text, 'day', p_day::text)::text;
  END IF;
  counted := 0;
  IF l.per_agent_per_day_max IS NULL OR p_amount <= l.per_agent_per_day_max THEN
    INSERT INTO payer_spending AS s (payer, day, agent_id, spent) VALUES (p_payer, p_day, p_agent, p_amount)
      ON CONFLICT (payer, day, agent_id) DO UPDATE SET spent = s.spent + EXCLUDED.spent
      WHERE l.per_agent_per_day_max IS NULL OR s.spent + EXCLUDED.spent <= l.per_agent_per_day_max;
    GET DIAGNOSTICS counted = ROW_COUNT;
  END IF;
  IF counted = 0 THEN
    SELECT spent INTO spent_now FROM payer_spending WHERE payer = p_payer AND day = p_day AND agent_id = p_agent;
    RAISE EXCEPTION 'the call would exceed the payer''s daily limit for this agent' USING ERRCODE = 'SL402',
      DETAIL = json_build_object('limit', 'perAgentPerDayMax', 'max', l.per_agent_per_day_max::text, 'spent', coalesce(spent_now, 0)::text, 'amount', p_amount::text, 'agentId', p_agent, 'day', p_day::text)::text;
  END IF;
  RETURN true;
END
$$;

-- Gives a refunded amount back to the day (and agent) its payment was counted in, once per source (the refund's
-- execution or chain), never more than was counted, never below zero; nothing for a payment that was not counted.
CREATE FUNCTION restore_spending(p_payment text, p_source text, p_amount bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  ls limit_spends%ROWTYPE;
  back bigint;
BEGIN
  SELECT * INTO ls FROM limit_spends WHERE payment_id = p_payment;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  back := LEAST(p_amount, ls.amount);
  INSERT INTO limit_restorations (payment_id, source, amount) VALUES (p_payment, p_source, back) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  UPDATE payer_spending SET spent = GREATEST(0, spent - back)
  WHERE payer = ls.payer AND day = ls.day AND agent_id IN ('', ls.agent_id);
END
$$;
