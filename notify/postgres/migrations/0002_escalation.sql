-- n8n-guard notify outbox on PostgreSQL, version 2: escalation deadlines.
-- A guard takes a due escalation under the row lock and moves escalate_at
-- on in the same transaction, so each step is taken by one guard, once.

ALTER TABLE guard_notifications ADD COLUMN escalate_at timestamptz;
CREATE INDEX guard_notifications_escalate ON guard_notifications (escalate_at) WHERE escalate_at IS NOT NULL;
