-- n8n-guard keystore on PostgreSQL, version 19: the resume pace keeps
-- the key each slot is held for (a slot frees when its key is no longer
-- resumed, whichever guard held it) and the latest calls with when each
-- returned, so the rate holds in any sliding window (keystore.Pace).
-- last_at and slots are still written, for a replica of an older release.
ALTER TABLE guard_resume_pace ADD COLUMN pace jsonb;
