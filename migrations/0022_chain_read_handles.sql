-- Issue 24 #3: a chained call's read-back handle used to be sha256('chain-budget:' || its request id), which anyone can
-- compute from the public chain view. Every such stored hash is replaced by the hash of random text nobody holds: old
-- handles stop working; the chain's payer still reads every call of its chain with the root payment's header, and new
-- calls get a random handle (services/chains/Children.ts).
UPDATE payments
SET header_sha256 = encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || id, 'UTF8')), 'hex')
WHERE purpose = 'chain' AND signature = 'chain-budget';
