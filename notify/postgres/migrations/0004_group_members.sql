-- n8n-guard notify outbox on PostgreSQL, version 4: the keys of a group of
-- stuck keys, so one decision reaches every key of the group and each key
-- is counted once when it is decided. A member goes with its head.
-- Groups written before this version have no members: their buttons
-- decide the head's key only.

CREATE TABLE guard_notify_members (
    head      text COLLATE "C" NOT NULL REFERENCES guard_notifications (id) ON DELETE CASCADE,
    namespace text COLLATE "C" NOT NULL,
    key       text COLLATE "C" NOT NULL,
    attempt   integer NOT NULL,
    settled   boolean NOT NULL DEFAULT false,
    PRIMARY KEY (namespace, key, attempt)
);
CREATE INDEX guard_notify_members_head ON guard_notify_members (head, namespace, key, attempt);
