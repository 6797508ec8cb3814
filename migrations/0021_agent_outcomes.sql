-- Execution outcomes waiting to be folded into their agent's reputation, health, counters and trust tier (issue 13).
-- A fact is appended in the transaction that records the outcome, so a paid call never locks its agent's row; the fold
-- worker (services/reputation/Outcomes.ts) deletes facts in batches and applies them under the agents' row locks in the
-- same transaction: each is folded exactly once, by whichever process claims it. No foreign keys: checking one would
-- take a share lock on the agent row on every call, which is what this table exists to avoid.
CREATE TABLE agent_outcomes (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  agent_id uuid NOT NULL,
  execution_id text NOT NULL,
  -- A root execution (reputation, health and counters) or a chained sub-call (health and counters only).
  scored boolean NOT NULL,
  success boolean NOT NULL,
  at timestamptz NOT NULL
);
-- A rating folds its agent's waiting outcomes first.
CREATE INDEX agent_outcomes_agent ON agent_outcomes (agent_id, seq);
