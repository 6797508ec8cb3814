-- Issue 25: every process sees the same truth. Any committed change to what an agent read shows (status, reputation,
-- health, counters, trust tier, circuit, profile...) tells every process's agent cache, in the writing transaction:
-- whoever writes it (a request, the reputation fold worker, a dispute's machine, a health probe, an operator) and
-- whatever code path. PostgreSQL delivers the notification at commit (never for a rolled-back change) and merges
-- duplicates within a transaction, so a fold of 1,000 outcomes of one agent sends one. Only `health_checked_at` (the
-- health prober's lease, not shown) and pending registrations (never shown, never cached) stay silent.
-- Listeners: services/agents/AgentCache.ts.
CREATE FUNCTION agents_cache_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('agent_cache_invalidate', NEW.id::text);
  RETURN NULL;
END $$;

CREATE TRIGGER agents_cache_notify AFTER UPDATE ON agents
  FOR EACH ROW WHEN (NOT (OLD.status = 'pending' AND NEW.status = 'pending')
    AND (to_jsonb(OLD) - 'health_checked_at') IS DISTINCT FROM (to_jsonb(NEW) - 'health_checked_at'))
  EXECUTE FUNCTION agents_cache_notify();
