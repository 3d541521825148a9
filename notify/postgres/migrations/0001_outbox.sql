-- n8n-guard notify outbox on PostgreSQL, version 1. Shared by every
-- replica: a notification is claimed by one replica before its Slack call
-- (claimed_by/claimed_until), so it is delivered once.

CREATE TABLE guard_notifications (
    id            text COLLATE "C" PRIMARY KEY,  -- sorts by creation time
    status        text NOT NULL,
    due_at        timestamptz,                   -- next Slack call; NULL: nothing to do
    delivered_at  timestamptz,
    claimed_by    text,                          -- the replica making the call
    claimed_until timestamptz,                   -- another replica may take over after this
    doc           bytea NOT NULL                 -- the record as JSON (bytea: keeps any text, even NUL escapes)
);
CREATE INDEX guard_notifications_due ON guard_notifications (due_at) WHERE due_at IS NOT NULL;

CREATE TABLE guard_notify_groups (
    grp     text COLLATE "C" PRIMARY KEY,
    head    text NOT NULL,
    ends_at timestamptz NOT NULL
);

CREATE TABLE guard_notify_once (
    once     bytea PRIMARY KEY,
    added_at timestamptz NOT NULL
);
CREATE INDEX guard_notify_once_added ON guard_notify_once (added_at);

CREATE TABLE guard_notify_meta (
    name  text PRIMARY KEY,
    value bigint NOT NULL
);
INSERT INTO guard_notify_meta (name, value) VALUES ('event_cursor', 0);

CREATE TABLE guard_notify_slack_users (
    email   text PRIMARY KEY,
    user_id text NOT NULL
);
