-- n8n-guard keystore on PostgreSQL, version 10: a person's reset of a
-- breaker (keystore.DecideResetBreaker): who reset it, why and when. It
-- stays while the breaker stays closed and goes when it opens again;
-- reset_by is empty when the breaker was not closed by a reset.

ALTER TABLE guard_breakers
    ADD COLUMN reset_by     text NOT NULL DEFAULT '',
    ADD COLUMN reset_reason text NOT NULL DEFAULT '',
    ADD COLUMN reset_at     timestamptz;
