-- n8n-guard keystore on PostgreSQL, version 7: approval before writing
-- (keystore/approval.go). A key awaiting approval, or decided and waiting
-- to be resumed, is parked with an approval reason; it is the approval
-- resumer's, not the catch-up runner's, so it leaves the catch-up queue.

DROP INDEX IF EXISTS guard_keys_parked;
CREATE INDEX guard_keys_parked ON guard_keys (destination, parked_at, namespace, key)
    WHERE state = 'parked' AND resume_sent_at IS NULL
      AND reason NOT IN ('resume_lost', 'awaiting_approval', 'approved', 'approval_rejected');
