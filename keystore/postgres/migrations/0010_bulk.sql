-- n8n-guard keystore on PostgreSQL, version 10: what each bulk id names
-- (keystore.BulkAction), kept from the first run of a bulk decision that
-- writes: the hash of its content and when it began. The same id with
-- other content is refused; a repeat with the same content finishes what
-- is left.

CREATE TABLE guard_bulk (
    id         text COLLATE "C" PRIMARY KEY,
    content    bytea NOT NULL,
    created_at timestamptz NOT NULL
);
