-- Operators (issue 12): every lever an operator pulls is recorded here (who, what, when, why), applied or refused, in
-- the transaction of its effect; one that moved a machine names the transition it caused (machine_transitions).
CREATE TABLE operator_actions (
  id text PRIMARY KEY CHECK (id LIKE 'opa\_%'),
  -- Insertion order: the order actions happened in (several in one millisecond are common; ids are random).
  seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  -- The name the operator gave (X-Operator) and which token was used (the first 16 hex digits of its SHA-256).
  operator text NOT NULL CHECK (length(operator) BETWEEN 1 AND 64),
  token_fingerprint text NOT NULL CHECK (token_fingerprint ~ '^[0-9a-f]{16}$'),
  action text NOT NULL,
  -- The actor the lever aimed at: a machine kind (machines/Host.ts) or 'agent', and its id.
  machine text NOT NULL,
  actor_id text NOT NULL,
  reason text NOT NULL CHECK (length(reason) BETWEEN 1 AND 1000),
  -- refused: the actor's state did not take the lever; nothing changed.
  outcome text NOT NULL CHECK (outcome IN ('applied', 'refused')),
  from_state text,
  to_state text,
  transition_id bigint REFERENCES machine_transitions (id),
  details jsonb NOT NULL DEFAULT '{}',
  at timestamptz NOT NULL
);
CREATE INDEX operator_actions_actor ON operator_actions (machine, actor_id, seq);
CREATE INDEX operator_actions_transition ON operator_actions (transition_id) WHERE transition_id IS NOT NULL;

-- Transactions by requester (the paying wallet), newest first; by provider uses executions_agent. Neither column
-- ever changes, so the index costs one entry per new execution and no update of a running one.
CREATE INDEX executions_payer ON executions (payer, created_at DESC, id DESC);
