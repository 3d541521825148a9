-- n8n-guard keystore on PostgreSQL, version 6: checks before paging
-- (keystore/check.go). An unknown key whose namespace or destination names
-- a check waits for it before a person is paged: the hold (which check,
-- since when, the claim of the guard calling it, how many claims, where
-- the failing execution waits) is kept as one JSON document.

ALTER TABLE guard_keys ADD COLUMN check_hold jsonb;

-- The check runner's queue: the keys held (a few at a time, sorted when
-- listed: a timestamptz cast cannot be indexed, it is not immutable).
CREATE INDEX guard_keys_check_hold ON guard_keys (namespace, key)
    WHERE state = 'unknown' AND check_hold IS NOT NULL;
