-- Disputes: a payer contests a completed, paid execution. The row carries its machine (machines/dispute.ts); opening it
-- freezes the execution's money in `disputes_held`, the platform's resolution moves it to the agent, the payer, or both.
CREATE TABLE disputes (
  id text PRIMARY KEY CHECK (id LIKE 'dsp\_%'),
  execution_id text NOT NULL UNIQUE REFERENCES executions (id),
  transaction_id text NOT NULL,
  escrow_id text NOT NULL REFERENCES escrows (id),
  agent_id uuid NOT NULL REFERENCES agents (id),
  client_wallet text NOT NULL,
  reason text NOT NULL CHECK (reason IN ('quality', 'non_delivery', 'overcharge')),
  client_evidence text CHECK (length(client_evidence) <= 2000),
  agent_response text CHECK (length(agent_response) <= 2000),
  responded_at timestamptz,
  status text NOT NULL CHECK (status IN ('open', 'escalated', 'resolved_agent', 'resolved_client', 'resolved_split')),
  machine_snapshot jsonb NOT NULL,
  -- The money frozen: the whole price, of which the agent's earnings; what the agent no longer had available is its debt.
  amount bigint NOT NULL CHECK (amount > 0),
  agent_amount bigint NOT NULL CHECK (agent_amount >= 0),
  debt bigint NOT NULL DEFAULT 0 CHECK (debt >= 0),
  client_refund bigint CHECK (client_refund >= 0),
  respond_by timestamptz NOT NULL,
  resolution_notes text,
  resolved_by text,
  escalated_at timestamptz,
  escalation_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  resolved_at timestamptz
);
CREATE INDEX disputes_agent ON disputes (agent_id, created_at DESC);
CREATE INDEX disputes_client ON disputes (client_wallet, created_at DESC);
CREATE INDEX disputes_status ON disputes (status, created_at);

CREATE TABLE dispute_evidence (
  id text PRIMARY KEY,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  dispute_id text NOT NULL REFERENCES disputes (id),
  submitted_by text NOT NULL CHECK (submitted_by IN ('agent', 'client')),
  evidence_type text NOT NULL CHECK (evidence_type IN ('text', 'url', 'screenshot')),
  content text NOT NULL CHECK (length(content) <= 5000),
  metadata jsonb,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dispute_evidence_dispute ON dispute_evidence (dispute_id, seq);

CREATE TABLE dispute_timeline (
  id text PRIMARY KEY,
  seq bigint GENERATED ALWAYS AS IDENTITY,
  dispute_id text NOT NULL REFERENCES disputes (id),
  event_type text NOT NULL CHECK (event_type IN ('opened', 'evidence_submitted', 'escalated', 'resolved')),
  actor text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dispute_timeline_dispute ON dispute_timeline (dispute_id, seq);

ALTER TABLE escrows DROP CONSTRAINT escrows_status_check;
ALTER TABLE escrows ADD CONSTRAINT escrows_status_check CHECK (status IN ('held', 'released', 'refunding', 'refunded', 'void', 'disputed'));

INSERT INTO ledger_accounts (id, kind, description) VALUES
  ('disputes_held', 'liability', 'Money of disputed transactions, frozen until the platform resolves the dispute');
