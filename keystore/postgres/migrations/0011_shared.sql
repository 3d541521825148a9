-- n8n-guard keystore on PostgreSQL, version 11: what replicas must agree
-- on beside the keys. On bbolt these are files in the data folder; on
-- PostgreSQL each replica's data folder is its own (an emptyDir), so they
-- live here.

-- Secrets by name (the console's session key, the resume secret, ...):
-- the first replica to start writes the value, every later one reads it.
-- Never updated in place: a new value is a deliberate DELETE by hand.
CREATE TABLE guard_shared_secrets (
    name       text COLLATE "C" PRIMARY KEY,
    value      bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- The console's sign-outs: a session id signed out on one replica is
-- refused by all, until the session would have expired anyway.
CREATE TABLE guard_console_signouts (
    id         text COLLATE "C" PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX guard_console_signouts_expiry ON guard_console_signouts (expires_at);
