-- n8n-guard notify outbox on PostgreSQL, version 3: the key a key_unknown
-- notification is about (so a key-resolved event finds its messages), and
-- the replay marks of Slack's signed requests, shared by every replica.
-- Rows written before this version have no key: their escalation step
-- still finds a key resolved elsewhere.

ALTER TABLE guard_notifications ADD COLUMN key_namespace text, ADD COLUMN key_name text;
CREATE INDEX guard_notifications_key ON guard_notifications (key_namespace, key_name) WHERE key_namespace IS NOT NULL;

CREATE TABLE guard_notify_marks (
    mark       text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);
CREATE INDEX guard_notify_marks_expires ON guard_notify_marks (expires_at);
