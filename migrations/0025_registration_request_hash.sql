-- Issue 25: a registration re-sent with the very same payment header answers the agent it created. The fingerprint
-- of the registration as first sent (sha256 of its canonical JSON, walletProof left out) tells a re-send from another
-- registration presenting a used header. NULL for agents registered before this migration (a re-send of one of
-- those is refused as a used payment, as before).
ALTER TABLE agents ADD COLUMN registration_request_sha256 text;
