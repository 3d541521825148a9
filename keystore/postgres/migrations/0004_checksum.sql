-- Every row of guard_keys carries a checksum (CRC-32C, keystore/postgres
-- checksum.go) of its record and version, written with it and checked at
-- every read: a row changed beneath the service (damage of the storage,
-- a file-level copy gone wrong; neither goes through triggers) is never
-- decided on; its key answers record_damaged. NULL: written before this
-- migration, or changed by an UPDATE that did not set it (see the trigger);
-- such a row is read unchecked, and the next start adds its checksum and
-- logs how many.
ALTER TABLE guard_keys ADD COLUMN checksum bigint;

-- A row updated without a new checksum (by an n8n-guard older than this
-- migration during a rolling upgrade, or by a person repairing a key by
-- hand: a decision, docs/runbooks.md) loses its checksum instead of keeping
-- one that no longer matches. Every write of this version changes the
-- checksum, since it covers the version.
CREATE FUNCTION guard_keys_checksum_stale() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.checksum IS NOT DISTINCT FROM OLD.checksum THEN
        NEW.checksum := NULL;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER guard_keys_checksum BEFORE UPDATE ON guard_keys
    FOR EACH ROW EXECUTE FUNCTION guard_keys_checksum_stale();
