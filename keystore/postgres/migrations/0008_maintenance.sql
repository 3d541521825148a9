-- n8n-guard keystore on PostgreSQL, version 8: the maintenance window of
-- a destination (keystore/maintenance.go): who paused it, why, since when
-- and until when. hold_by is empty when the breaker has no window.

ALTER TABLE guard_breakers
    ADD COLUMN hold_by     text NOT NULL DEFAULT '',
    ADD COLUMN hold_reason text NOT NULL DEFAULT '',
    ADD COLUMN hold_set_at timestamptz,
    ADD COLUMN hold_until  timestamptz;
