-- n8n-guard keystore on PostgreSQL, version 5: parked keys
-- (keystore/park.go). A key whose destination is paused waits in n8n; the
-- guard keeps where to resume it (never the payload) and resumes it when
-- the destination is back.

ALTER TABLE guard_keys DROP CONSTRAINT guard_keys_state_check;
ALTER TABLE guard_keys ADD CONSTRAINT guard_keys_state_check
    CHECK (state IN ('reserved', 'completed', 'failed', 'unknown', 'parked'));

ALTER TABLE guard_keys
    ADD COLUMN parked_at          timestamptz,
    ADD COLUMN resume_url         text NOT NULL DEFAULT '',
    ADD COLUMN resume_sent_at     timestamptz,
    ADD COLUMN resume_claim_until timestamptz;

-- The catch-up runner's queue: per destination, oldest parked first, the
-- keys that wait to be resumed (not yet sent, not lost).
CREATE INDEX guard_keys_parked ON guard_keys (destination, parked_at, namespace, key)
    WHERE state = 'parked' AND resume_sent_at IS NULL AND reason <> 'resume_lost';
