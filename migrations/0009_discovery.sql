-- Discovery: per-agent search documents (weighted full-text, tags, capability text, cheapest price) kept in step with
-- the agent by a trigger, a lexicon of indexed words for typo and partial-word correction (pg_trgm), and the index that
-- serves unfiltered listings in reputation order.

-- pg_trgm is a trusted extension (PostgreSQL 13+): the database owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

-- OR of text-search queries (alternatives of one query word: synonyms, corrections).
CREATE AGGREGATE tsquery_or_agg(tsquery) (SFUNC = tsquery_or, STYPE = tsquery);

-- One row per agent, rewritten only when its text changes: the agents row itself takes an update on every execution
-- (reputation, health), and keeping these GIN-indexed columns out of it keeps those updates cheap.
CREATE TABLE agent_search (
  agent_id uuid PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
  name_tsv tsvector NOT NULL,
  capabilities_tsv tsvector NOT NULL,
  tags_tsv tsvector NOT NULL,
  description_tsv tsvector NOT NULL,
  -- The four above with weights A (name), B (capability ids and names), C (tags), D (agent and capability descriptions).
  document tsvector NOT NULL,
  tags text[] NOT NULL,
  -- Capability ids and names in lower case, one per line: the `capability` substring filter.
  capability_text text NOT NULL,
  -- The cheapest capability's base price in micro-USDC: the `maxPrice` filter.
  min_price bigint NOT NULL
);
CREATE INDEX agent_search_document ON agent_search USING gin (document);
CREATE INDEX agent_search_tags ON agent_search USING gin (tags);
CREATE INDEX agent_search_capability_text ON agent_search USING gin (capability_text gin_trgm_ops);
CREATE INDEX agent_search_min_price ON agent_search (min_price);

-- Every word (3-40 letters) that appears in an agent's searchable text: query words that are not here are corrected to
-- their nearest words (trigram similarity) or completed (prefix). Words are never removed: a stale one matches nothing.
CREATE TABLE search_terms (term text PRIMARY KEY);
CREATE INDEX search_terms_trgm ON search_terms USING gin (term gin_trgm_ops);

CREATE FUNCTION agent_search_refresh() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  capability_names text;
  capability_descriptions text;
  cheapest bigint;
  tag_list text[];
  name_text text;
  name_v tsvector;
  caps_v tsvector;
  tags_v tsvector;
  desc_v tsvector;
BEGIN
  SELECT coalesce(string_agg(lower(coalesce(c->>'id', '') || E'\n' || coalesce(c->>'name', '')), E'\n'), ''),
         coalesce(string_agg(coalesce(c->>'description', ''), E'\n'), ''),
         coalesce(min(round((c->'pricing'->>'basePrice')::numeric * 1000000)::bigint), 0)
    INTO capability_names, capability_descriptions, cheapest
    FROM jsonb_array_elements(NEW.capabilities) AS c;
  SELECT coalesce(array_agg(t), '{}') INTO tag_list FROM jsonb_array_elements_text(NEW.tags) AS t;
  -- CamelCase names count as their words too ("InvoiceParser" is also "Invoice Parser", "SEOScout" "SEO Scout").
  name_text := regexp_replace(regexp_replace(NEW.name, '([[:lower:][:digit:]])([[:upper:]])', '\1 \2', 'g'), '([[:upper:]]+)([[:upper:]][[:lower:]])', '\1 \2', 'g');
  IF name_text <> NEW.name THEN name_text := NEW.name || ' ' || name_text; END IF;
  -- Hyphens and underscores in ids and tags separate words ("image-tagging" is "image tagging").
  name_v := to_tsvector('english', name_text);
  caps_v := to_tsvector('english', translate(capability_names, '-_.:', '    '));
  tags_v := to_tsvector('english', translate(array_to_string(tag_list, ' '), '-_.:', '    '));
  desc_v := to_tsvector('english', coalesce(NEW.description, '') || E'\n' || capability_descriptions);
  INSERT INTO agent_search (agent_id, name_tsv, capabilities_tsv, tags_tsv, description_tsv, document, tags, capability_text, min_price)
  VALUES (NEW.id, name_v, caps_v, tags_v, desc_v,
          setweight(name_v, 'A') || setweight(caps_v, 'B') || setweight(tags_v, 'C') || setweight(desc_v, 'D'),
          tag_list, capability_names, cheapest)
  ON CONFLICT (agent_id) DO UPDATE SET
    name_tsv = EXCLUDED.name_tsv, capabilities_tsv = EXCLUDED.capabilities_tsv, tags_tsv = EXCLUDED.tags_tsv,
    description_tsv = EXCLUDED.description_tsv, document = EXCLUDED.document, tags = EXCLUDED.tags,
    capability_text = EXCLUDED.capability_text, min_price = EXCLUDED.min_price;
  INSERT INTO search_terms (term)
    SELECT DISTINCT w FROM unnest(tsvector_to_array(to_tsvector('simple', translate(
      name_text || ' ' || capability_names || ' ' || array_to_string(tag_list, ' ') || ' ' || coalesce(NEW.description, '')
        || ' ' || capability_descriptions, '-_.:', '    ')))) AS w
    WHERE char_length(w) BETWEEN 3 AND 40 AND w !~ '[0-9]'
  ON CONFLICT (term) DO NOTHING;
  RETURN NULL;
END $$;

CREATE TRIGGER agents_search_refresh AFTER INSERT OR UPDATE OF name, description, tags, capabilities ON agents
  FOR EACH ROW EXECUTE FUNCTION agent_search_refresh();

-- Agents registered before this migration.
UPDATE agents SET name = name;

-- Listings without a text query, in reputation order, stop after a page instead of sorting every active agent.
CREATE INDEX agents_discover_rank ON agents (reputation_score DESC, health_score DESC, id) WHERE status = 'active';
