-- n8n-guard keystore on PostgreSQL, version 3: what the operator console
-- (/ui) reads without walking every key.

-- Search by the holder of the last attempt's lease, in key order, among
-- the failed and unknown keys (as on bbolt; reserved keys are found on
-- guard_keys_open, completed keys are not searched by owner).
CREATE INDEX guard_keys_owner ON guard_keys (owner, namespace, key) WHERE owner <> '' AND state IN ('failed', 'unknown');

-- The unknown keys in the order they went unknown: the queue a person
-- works through, oldest first.
CREATE INDEX guard_keys_waiting ON guard_keys (updated_at, namespace, key) WHERE state = 'unknown';

-- Hourly counts of what the guard answered, for the console's chart. They
-- are added in the transaction of the write they count; a key's writes
-- always land on the same of 16 shards, so concurrent writers of different
-- keys rarely wait on one counter row.
CREATE TABLE guard_activity (
    hour  timestamptz NOT NULL,
    kind  smallint NOT NULL,
    shard smallint NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (hour, kind, shard)
);

-- Keys per namespace and state, kept by every write that adds a key,
-- changes its state or deletes it, so that the overview and the metrics
-- scrape do not count a million rows. Also in 16 shards by key; a write
-- changes its rows in the order of the state's name, so two writers never
-- wait on each other in a circle.
CREATE TABLE guard_counts (
    namespace text COLLATE "C" NOT NULL,
    state     text NOT NULL,
    shard     smallint NOT NULL,
    n         bigint NOT NULL,
    PRIMARY KEY (namespace, state, shard)
);
INSERT INTO guard_counts (namespace, state, shard, n)
    SELECT namespace, state, 0, count(*) FROM guard_keys GROUP BY namespace, state;
