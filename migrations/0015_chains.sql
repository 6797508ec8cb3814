-- Agent-to-agent chains (issue 9): a root client pre-pays a budget with one x402 payment; agents called inside the chain
-- hire other agents with a signed token, each sub-call reserved from the chain's remaining budget under the chain row's
-- lock. The chain row carries its machine (machines/chain.ts); what is unspent when it ends is refunded on chain once.
CREATE TABLE chains (
  id uuid PRIMARY KEY,
  -- The paid execution that started the chain (inserted in the same statement; checked at its end).
  root_execution_id text NOT NULL UNIQUE REFERENCES executions (id) DEFERRABLE INITIALLY DEFERRED,
  root_agent_id uuid NOT NULL REFERENCES agents (id),
  payment_id text NOT NULL UNIQUE REFERENCES payments (id),
  payer text NOT NULL CHECK (payer ~ '^0x[0-9a-f]{40}$'),
  -- The whole x402 payment (0.01 to 1,000.00 USDC), of which the root call's price went to its escrow.
  total_budget bigint NOT NULL CHECK (total_budget BETWEEN 10000 AND 1000000000),
  -- The authoritative budget: reserved by one UPDATE per sub-call (never below zero), given back by failed sub-calls.
  remaining bigint NOT NULL CHECK (remaining >= 0 AND remaining <= total_budget),
  -- min(root agent's chain_max_depth, 5) when the chain started.
  max_depth integer NOT NULL CHECK (max_depth BETWEEN 1 AND 5),
  status text NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'partial')),
  machine_snapshot jsonb NOT NULL,
  -- W3C trace id shared by every request of the chain.
  trace_id text NOT NULL CHECK (trace_id ~ '^[0-9a-f]{32}$'),
  -- What the end gave back to the payer (refunded on chain) or voided (the root payment never settled).
  refund_amount bigint CHECK (refund_amount >= 0),
  budget_warned boolean NOT NULL DEFAULT false,
  started_at timestamptz NOT NULL,
  completed_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX chains_root_agent ON chains (root_agent_id, started_at);

ALTER TABLE executions ADD COLUMN chain_id uuid REFERENCES chains (id);
CREATE INDEX executions_chain ON executions (chain_id, depth) WHERE chain_id IS NOT NULL;
CREATE INDEX executions_parent ON executions (parent_execution_id) WHERE parent_execution_id IS NOT NULL;

-- A sub-call is paid from its chain's budget: its payment row stands for that (settled from the start, never sent).
ALTER TABLE payments DROP CONSTRAINT payments_purpose_check;
ALTER TABLE payments ADD CONSTRAINT payments_purpose_check CHECK (purpose IN ('registration', 'execution', 'chain'));

-- A failed sub-call's escrow goes back to its chain's budget.
ALTER TABLE escrows DROP CONSTRAINT escrows_status_check;
ALTER TABLE escrows ADD CONSTRAINT escrows_status_check
  CHECK (status IN ('held', 'released', 'refunding', 'refunded', 'void', 'disputed', 'returned'));

-- The unspent budget's refund is keyed by its chain (one per chain); other refunds by their execution.
ALTER TABLE refunds ALTER COLUMN execution_id DROP NOT NULL;
ALTER TABLE refunds ADD COLUMN chain_id uuid UNIQUE REFERENCES chains (id);
ALTER TABLE refunds ADD CONSTRAINT refunds_one_subject CHECK ((execution_id IS NULL) <> (chain_id IS NULL));

INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('chain_budgets', 'liability', 'Chain budgets paid by root clients, not yet spent by sub-calls nor refunded');
