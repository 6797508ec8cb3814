-- Agents' account balances kept up to date with every entry (O(1) reads for balances and escrow.released events).
-- Platform accounts are not maintained this way: every execution touches them, and a hot row would serialise all of them.
ALTER TABLE ledger_accounts ADD COLUMN balance bigint NOT NULL DEFAULT 0;

UPDATE ledger_accounts a
SET balance = COALESCE((SELECT SUM(e.amount) FROM ledger_entries e WHERE e.account_id = a.id), 0)
WHERE a.agent_id IS NOT NULL;

CREATE FUNCTION ledger_agent_balance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE ledger_accounts SET balance = balance + NEW.amount WHERE id = NEW.account_id;
  RETURN NULL;
END $$;

CREATE TRIGGER ledger_entries_agent_balance AFTER INSERT ON ledger_entries
  FOR EACH ROW WHEN (NEW.account_id LIKE 'agent:%') EXECUTE FUNCTION ledger_agent_balance();
