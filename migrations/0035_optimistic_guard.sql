-- The guard of an optimistic unit of work (services/sql/UnitOfWork.ts `optimistic`): the one statement that writes a
-- transaction's changes without BEGIN/COMMIT calls this with whether every row it stepped from is still as it was read;
-- when one is not, it aborts the whole statement (nothing written) with SQLSTATE OG409 and the service runs the
-- transaction again on the locking path.
CREATE FUNCTION optimistic_guard(ok boolean) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF ok IS NOT TRUE THEN
    RAISE EXCEPTION 'a row changed between its optimistic read and its write' USING ERRCODE = 'OG409';
  END IF;
  RETURN true;
END
$$;
