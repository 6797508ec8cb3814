-- Issue 24 #6: who set an agent's status, so that an operator's pause (inactive) or suspension can only be lifted by an
-- operator, and the agent's resource says whose decision it is. Existing rows: a suspension is always the platform's; an
-- inactive agent is taken as paused by an operator when the latest lever applied to it was a pause (conservative: the
-- owner then asks an operator), otherwise by its owner.
ALTER TABLE agents ADD COLUMN status_set_by text NOT NULL DEFAULT 'owner' CHECK (status_set_by IN ('owner', 'operator'));
UPDATE agents a SET status_set_by = 'operator'
WHERE a.status = 'suspended'
   OR (a.status = 'inactive' AND (
        SELECT o.action FROM operator_actions o
        WHERE o.machine = 'agent' AND o.actor_id = a.id::text AND o.outcome = 'applied'
        ORDER BY o.seq DESC LIMIT 1) = 'pause');
