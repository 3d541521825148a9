-- n8n-guard keystore on PostgreSQL, version 18: when a parked event first
-- parked, kept when its woken execution meets the destination paused again
-- and parks anew (keystore.Record.ParkedSince), so that parked_limit counts
-- the whole wait of a rolling outage. NULL for every row written before and
-- for an event parked once: it has waited since parked_at. The row checksum
-- covers it only when it is set (checksum.go), so a row written before
-- hashes as it did.
ALTER TABLE guard_keys ADD COLUMN parked_since timestamptz;
