-- Discovery: a narrow listing row per agent (every filter and sort column in one table), postings of each active agent's
-- stemmed words with the best field each appears in (text search without reading documents), and a lexicon of words for
-- typo and partial-word correction (pg_trgm). All kept in step with `agents` by triggers, in the writing transaction.

-- pg_trgm is a trusted extension (PostgreSQL 13+): the database owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- One row per agent. Reputation and health change with every execution; they are copied here so that a listing, its
-- filters and its capped count read one narrow table.
CREATE TABLE agent_listing (
  agent_id uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  status text NOT NULL,
  reputation_score integer NOT NULL,
  health_score double precision NOT NULL,
  -- chain_settings.chain_enabled
  chainable boolean NOT NULL,
  -- The cheapest capability's base price in micro-USDC: the `maxPrice` filter.
  min_price bigint NOT NULL,
  -- Lower case, as registered.
  tags text[] NOT NULL,
  -- Capability ids and names in lower case, one per line: the `capability` substring filter.
  capability_text text NOT NULL,
  created_at timestamptz NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX agent_listing_reputation ON agent_listing (reputation_score DESC, health_score DESC, agent_id) WHERE status = 'active';
CREATE INDEX agent_listing_price ON agent_listing (min_price, reputation_score DESC, agent_id) WHERE status = 'active';
CREATE INDEX agent_listing_newest ON agent_listing (created_at DESC, agent_id) WHERE status = 'active';
CREATE INDEX agent_listing_tags ON agent_listing USING gin (tags) WHERE status = 'active';
CREATE INDEX agent_listing_capability ON agent_listing USING gin (capability_text gin_trgm_ops) WHERE status = 'active';

-- Postings: one row per (stemmed word, active agent) with the weight of the best field the word is in (name 1,
-- capability id or name 0.8, tag 0.6, description 0.4) and `rank`, the order in which a query reads them: the field
-- weight's share of composite_score plus the agent's standing rounded down to 0.02 (so a change of standing rewrites an
-- agent's postings only when it crosses a step). Only active agents have postings.
CREATE TABLE agent_terms (
  term text NOT NULL,
  agent_id uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
  weight real NOT NULL,
  rank real NOT NULL,
  PRIMARY KEY (agent_id, term)
);
CREATE INDEX agent_terms_rank ON agent_terms (term, rank DESC) INCLUDE (agent_id, weight);

-- Every word (3-40 letters) that appears in an agent's searchable text: query words that are not here are corrected to
-- their nearest words (trigram similarity) or completed (prefix). Words are never removed: a stale one matches nothing.
CREATE TABLE search_terms (term text PRIMARY KEY);
CREATE INDEX search_terms_trgm ON search_terms USING gin (term gin_trgm_ops);

-- The standing part of composite_score (reputation 0.25, health 0.15; see services/discovery/Ranking.ts), in steps of 0.02.
CREATE FUNCTION discovery_standing_step(reputation integer, health double precision) RETURNS real
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN (floor((0.25 * reputation / 100.0 + 0.15 * health) * 50) / 50)::real;

-- Rebuilds an agent's listing row, postings and lexicon words from its row.
CREATE FUNCTION discovery_reindex(agent agents) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
  capability_names text;
  capability_descriptions text;
  cheapest bigint;
  tag_list text[];
  name_text text;
  step real;
BEGIN
  SELECT coalesce(string_agg(lower(coalesce(c->>'id', '') || E'\n' || coalesce(c->>'name', '')), E'\n'), ''),
         coalesce(string_agg(coalesce(c->>'description', ''), E'\n'), ''),
         coalesce(min(round((c->'pricing'->>'basePrice')::numeric * 1000000)::bigint), 0)
    INTO capability_names, capability_descriptions, cheapest
    FROM jsonb_array_elements(agent.capabilities) AS c;
  SELECT coalesce(array_agg(lower(t)), '{}') INTO tag_list FROM jsonb_array_elements_text(agent.tags) AS t;
  INSERT INTO agent_listing (agent_id, status, reputation_score, health_score, chainable, min_price, tags, capability_text, created_at)
  VALUES (agent.id, agent.status, agent.reputation_score, agent.health_score, coalesce((agent.chain_settings->>'chain_enabled')::boolean, false),
          cheapest, tag_list, capability_names, agent.created_at)
  ON CONFLICT (agent_id) DO UPDATE SET
    status = EXCLUDED.status, reputation_score = EXCLUDED.reputation_score, health_score = EXCLUDED.health_score,
    chainable = EXCLUDED.chainable, min_price = EXCLUDED.min_price, tags = EXCLUDED.tags,
    capability_text = EXCLUDED.capability_text, created_at = EXCLUDED.created_at;

  DELETE FROM agent_terms WHERE agent_id = agent.id;
  IF agent.status <> 'active' THEN RETURN; END IF;
  -- CamelCase names count as their words too ("InvoiceParser" is also "Invoice Parser", "SEOScout" "SEO Scout").
  name_text := regexp_replace(regexp_replace(agent.name, '([[:lower:][:digit:]])([[:upper:]])', '\1 \2', 'g'), '([[:upper:]]+)([[:upper:]][[:lower:]])', '\1 \2', 'g');
  IF name_text <> agent.name THEN name_text := agent.name || ' ' || name_text; END IF;
  step := discovery_standing_step(agent.reputation_score, agent.health_score);
  -- Hyphens, underscores, dots and colons in ids and tags separate words ("image-tagging" is "image tagging").
  INSERT INTO agent_terms (term, agent_id, weight, rank)
  SELECT w.term, agent.id, max(w.weight), 0.6 * max(w.weight) + step
  FROM (
    SELECT unnest(tsvector_to_array(to_tsvector('english', name_text))) AS term, 1.0::real AS weight
    UNION ALL SELECT unnest(tsvector_to_array(to_tsvector('english', translate(capability_names, '-_.:', '    ')))), 0.8
    UNION ALL SELECT unnest(tsvector_to_array(to_tsvector('english', translate(array_to_string(tag_list, ' '), '-_.:', '    ')))), 0.6
    UNION ALL SELECT unnest(tsvector_to_array(to_tsvector('english', coalesce(agent.description, '') || E'\n' || capability_descriptions))), 0.4
  ) AS w
  GROUP BY w.term;
  INSERT INTO search_terms (term)
    SELECT DISTINCT w FROM unnest(tsvector_to_array(to_tsvector('simple', translate(
      name_text || ' ' || capability_names || ' ' || array_to_string(tag_list, ' ') || ' ' || coalesce(agent.description, '')
        || ' ' || capability_descriptions, '-_.:', '    ')))) AS w
    WHERE char_length(w) BETWEEN 3 AND 40 AND w !~ '[0-9]'
  ON CONFLICT (term) DO NOTHING;
END $$;

-- Text, tags, capabilities or status changed, or a new agent.
CREATE FUNCTION discovery_index_agent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM discovery_reindex(NEW);
  RETURN NULL;
END $$;

-- Reputation, health or chaining changed (every execution changes the first two): the listing row, and the postings'
-- rank only when the standing crossed a step.
CREATE FUNCTION discovery_index_standing() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  step real := discovery_standing_step(NEW.reputation_score, NEW.health_score);
BEGIN
  UPDATE agent_listing SET reputation_score = NEW.reputation_score, health_score = NEW.health_score,
         chainable = coalesce((NEW.chain_settings->>'chain_enabled')::boolean, false)
   WHERE agent_id = NEW.id;
  IF NEW.status = 'active' AND step <> discovery_standing_step(OLD.reputation_score, OLD.health_score) THEN
    UPDATE agent_terms SET rank = 0.6 * weight + step WHERE agent_id = NEW.id;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER agents_discovery_insert AFTER INSERT ON agents
  FOR EACH ROW EXECUTE FUNCTION discovery_index_agent();
CREATE TRIGGER agents_discovery_text AFTER UPDATE OF name, description, tags, capabilities, status ON agents
  FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.description IS DISTINCT FROM NEW.description
    OR OLD.tags IS DISTINCT FROM NEW.tags OR OLD.capabilities IS DISTINCT FROM NEW.capabilities OR OLD.status IS DISTINCT FROM NEW.status)
  EXECUTE FUNCTION discovery_index_agent();
CREATE TRIGGER agents_discovery_standing AFTER UPDATE OF reputation_score, health_score, chain_settings ON agents
  FOR EACH ROW WHEN (OLD.reputation_score IS DISTINCT FROM NEW.reputation_score OR OLD.health_score IS DISTINCT FROM NEW.health_score
    OR OLD.chain_settings IS DISTINCT FROM NEW.chain_settings)
  EXECUTE FUNCTION discovery_index_standing();

-- Agents registered before this migration.
SELECT discovery_reindex(a) FROM agents AS a;

-- Ratings (POST /api/v1/reputation/ratings): a paid root execution is rated at most once.
CREATE UNIQUE INDEX reputation_events_one_rating ON reputation_events (execution_id) WHERE event_type = 'rating';
-- Insertion order, to list events written in the same millisecond newest first.
ALTER TABLE reputation_events ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
