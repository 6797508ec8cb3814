-- Credit pays for calls (issue 28 item 2): a call paid from the payer's credit (`X-Credit-Payment`) has a payment row of
-- purpose 'credit', settled from the start (the money is already in the treasury). Its nonce column holds a hash
-- derived from the signed spend's nonce, so the (asset, payer, nonce) unique index refuses a replayed spend.
-- docs/decisions.md "Credit pays for calls".
ALTER TABLE payments DROP CONSTRAINT payments_purpose_check;
ALTER TABLE payments ADD CONSTRAINT payments_purpose_check CHECK (purpose IN ('registration', 'execution', 'chain', 'credit'));
