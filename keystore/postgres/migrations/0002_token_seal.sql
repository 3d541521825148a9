-- n8n-guard keystore on PostgreSQL, version 2: repeatable reserves.
--
-- The token of an attempt whose reserve carried a request_id, sealed with
-- that request_id (keystore.Record.TokenSeal): a repeat of the same
-- request recovers the same token. NULL for attempts without one, and for
-- every row written before.

ALTER TABLE guard_keys ADD COLUMN token_seal bytea;
