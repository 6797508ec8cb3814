-- The guard of an optimistic unit of work (services/sql/UnitOfWork.ts `optimistic`): the one statement that writes a
-- transaction's changes without BEGIN/COMMIT calls this with whether every row it stepped from is still as it was read;
-- when one is not, it aborts the whole statement (nothing written) with SQLSTATE OG409 and the service runs the
-- transaction again on the locking path.
CREATE FUNCTION optimistic_guard(ok boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION 'a row changed between its optimistic read and its write' USING ERRCODE = 'OG409';
  END IF;
  RETURN true;
END
$$;

-- The paid call's rate-limit windows counted inside its reservation statement (services/executions/RateLimits.ts
-- `countStatement`, the statement's main query, so it runs before the reservation's writes): both windows are counted
-- under their rows' locks (agent first, as the separate count did) and, over either, the whole reservation aborts with
-- SQLSTATE RL429 (its DETAIL the counts): nothing reserved, nothing counted, nothing to give back.
CREATE FUNCTION rate_window_count(agent_key text, client_key text, start timestamptz, agent_limit integer, client_limit integer)
RETURNS TABLE (agent_count integer, client_count integer)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  a integer;
  c integer;
BEGIN
  INSERT INTO rate_limit_windows (key, window_start, count) VALUES (agent_key, start, 1)
    ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_windows.count + 1 RETURNING count INTO a;
  INSERT INTO rate_limit_windows (key, window_start, count) VALUES (client_key, start, 1)
    ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_windows.count + 1 RETURNING count INTO c;
  IF a > agent_limit OR c > client_limit THEN
    RAISE EXCEPTION 'over the rate limit' USING ERRCODE = 'RL429', DETAIL = json_build_object('agentCount', a, 'clientCount', c)::text;
  END IF;
  agent_count := a;
  client_count := c;
  RETURN NEXT;
END
$$;
