-- n8n-guard keystore on PostgreSQL, version 23: the figures of a caught_up
-- event (keystore.EventCaughtUp): how many parked events the catch-up
-- resumed, how many n8n no longer held, and how long it took from the
-- breaker's close, in milliseconds. notify folds them into the outage's
-- message, so the log line and Slack say one figure. 0 for every other
-- event and every row written before.
ALTER TABLE guard_events
    ADD COLUMN resumed integer NOT NULL DEFAULT 0,
    ADD COLUMN lost integer NOT NULL DEFAULT 0,
    ADD COLUMN took_ms bigint NOT NULL DEFAULT 0;
