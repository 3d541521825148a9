-- n8n-guard keystore on PostgreSQL, version 14: what an event is, in one
-- line (keystore.ReserveRequest.Summary: "Invoice 4711 · 12,000 EUR ·
-- ACME"), on the key and on the approval_requested event that tells the
-- approvers. Empty for every row written before and for reserves without
-- one. The row checksum covers it only when it is set (checksum.go), so a
-- row written before hashes as it did.
ALTER TABLE guard_keys ADD COLUMN summary text NOT NULL DEFAULT '';
ALTER TABLE guard_events ADD COLUMN summary text NOT NULL DEFAULT '';
