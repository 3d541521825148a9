-- n8n-guard keystore on PostgreSQL, version 12: the keys a closed
-- breaker counted as failing (keystore.Breaker.FailedKeys: digests of
-- namespace and key), so that a key failing again is not counted again
-- and a breaker opens on failures of distinct keys. Rows written before
-- keep their count with no digests and count on from it.

ALTER TABLE guard_breakers
    ADD COLUMN failed_keys text[] NOT NULL DEFAULT '{}';
