-- n8n-guard keystore on PostgreSQL, version 22: parked keys by the start
-- of their wait (keystore/wait.go, keystore.Record.WaitingSince: the first
-- of their parkings in a row, parked_since when it is before parked_at,
-- else parked_at; LEAST skips a NULL parked_since), across destinations
-- and within one, so that "the keys waiting since before T" (the overdue
-- keys of parked_limit, the console's parked list) is one range read that
-- stops at the first key that began to wait later. No column: the wait
-- start is what the two columns say, and rows an older n8n-guard writes
-- during a rolling upgrade are indexed the same way.
CREATE INDEX guard_keys_waits ON guard_keys ((LEAST(parked_since, parked_at)), namespace, key)
    WHERE state = 'parked' AND parked_at IS NOT NULL;
CREATE INDEX guard_keys_waits_destination ON guard_keys (destination, (LEAST(parked_since, parked_at)), namespace, key)
    WHERE state = 'parked' AND parked_at IS NOT NULL;
