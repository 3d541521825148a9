-- n8n-guard keystore on PostgreSQL, version 1.
--
-- Names are prefixed guard_ so the tables can share a database (or better,
-- a schema) with other applications. Keys and namespaces use the "C"
-- collation: listings are ordered by bytes, as on bbolt, and cursors
-- compare the same way on every server whatever its locale.

CREATE TABLE guard_keys (
    namespace        text COLLATE "C" NOT NULL,
    key              text COLLATE "C" NOT NULL,
    state            text NOT NULL CHECK (state IN ('reserved', 'completed', 'failed', 'unknown')),
    attempt          integer NOT NULL,
    owner            text NOT NULL DEFAULT '',
    lease_expires_at timestamptz,
    result_ref       text NOT NULL DEFAULT '',
    result           json,          -- json, not jsonb: the caller's text is kept as sent
    reason           text NOT NULL DEFAULT '',
    message          text NOT NULL DEFAULT '',
    retryable        boolean NOT NULL DEFAULT false,
    via              text NOT NULL DEFAULT '',
    destination      text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    expires_at       timestamptz,
    resolved_by      text NOT NULL DEFAULT '',
    resolved_at      timestamptz,
    note             text NOT NULL DEFAULT '',
    history          jsonb NOT NULL DEFAULT '[]',
    fingerprint      bytea,         -- hash of the payload; the payload is never stored
    token_hash       bytea,         -- hash of the current attempt's token
    -- Bumped by every write: a write names the version its decision read,
    -- and guard_expect_row aborts it when another write came first.
    version          bigint NOT NULL DEFAULT 1,
    PRIMARY KEY (namespace, key)
);

-- The queues a person works through (reserved, failed, unknown). Completed
-- keys, the bulk, are listed from the primary key.
CREATE INDEX guard_keys_open ON guard_keys (state, namespace, key) WHERE state <> 'completed';
-- The sweeper walks these from the oldest entry.
CREATE INDEX guard_keys_leases ON guard_keys (lease_expires_at) WHERE state = 'reserved';
CREATE INDEX guard_keys_expires ON guard_keys (expires_at) WHERE expires_at IS NOT NULL;

-- guard_expect_row aborts the transaction (serialization_failure, so the
-- caller runs the decision again) unless a conditional write changed
-- exactly one row.
CREATE FUNCTION guard_expect_row(changed bigint, what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF changed <> 1 THEN
        RAISE EXCEPTION 'n8n-guard: % was changed by another writer', what USING ERRCODE = '40001';
    END IF;
END
$$;

CREATE TABLE guard_breakers (
    destination          text COLLATE "C" PRIMARY KEY,
    state                text NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    opened_at            timestamptz,
    reopens_at           timestamptz,
    consecutive_failures integer NOT NULL DEFAULT 0,
    paused_reserves      integer NOT NULL DEFAULT 0,
    probe_namespace      text NOT NULL DEFAULT '',
    probe_key            text NOT NULL DEFAULT '',
    probe_until          timestamptz
);

-- The event log. seq is taken from guard_event_seq, whose single row stays
-- locked until the writing transaction commits: events therefore become
-- visible in seq order, and a reader's cursor (seq > after) never skips
-- one that commits late, which a plain sequence would allow.
CREATE TABLE guard_events (
    seq             bigint PRIMARY KEY,
    at              timestamptz NOT NULL,
    kind            text NOT NULL,
    namespace       text NOT NULL DEFAULT '',
    key             text NOT NULL DEFAULT '',
    attempt         integer NOT NULL DEFAULT 0,
    owner           text NOT NULL DEFAULT '',
    destination     text NOT NULL DEFAULT '',
    reason          text NOT NULL DEFAULT '',
    message         text NOT NULL DEFAULT '',
    reopens_at      timestamptz,
    paused_reserves integer NOT NULL DEFAULT 0
);
CREATE INDEX guard_events_at ON guard_events (at);

CREATE TABLE guard_event_seq (
    id  boolean PRIMARY KEY DEFAULT true CHECK (id),
    seq bigint NOT NULL
);
INSERT INTO guard_event_seq (id, seq) VALUES (true, 0);
