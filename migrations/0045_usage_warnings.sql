-- A per-token capability answered without X-Usage-Units charges 0 tokens: the agent works for the platform fee alone.
-- The agent's record says so (shown on its view; its owner's webhook gets agent.usage_missing, at most once an hour).
ALTER TABLE agents ADD COLUMN usage_warning jsonb;
