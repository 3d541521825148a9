-- n8n-guard keystore on PostgreSQL, version 16: a bulk decision keeps
-- whether it also re-ran the keys' executions in n8n (the audit says so).
-- A column with a constant default: no table is rewritten.
ALTER TABLE guard_bulk ADD COLUMN rerun boolean NOT NULL DEFAULT false;
