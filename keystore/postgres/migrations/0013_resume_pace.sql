-- n8n-guard keystore on PostgreSQL, version 13: one catch-up pace per
-- destination for every replica. Each resume call takes its turn here
-- (keystore.DecideResumeTurn), so catch_up_rate and catch_up_concurrency
-- hold for the destination whatever the number of guards.
CREATE TABLE guard_resume_pace (
    destination text COLLATE "C" PRIMARY KEY,
    last_at     timestamptz,
    -- until when each in-flight slot is held (NULL or past: free)
    slots       timestamptz[] NOT NULL DEFAULT '{}'
);
