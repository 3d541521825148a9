-- n8n-guard keystore on PostgreSQL, version 20: the stage of a key
-- (keystore/stage.go), stored and indexed, so that a queue reads the keys
-- of its stage and nothing else (the re-run worker its granted keys, the
-- approval resumer the approved and rejected ones). n8n-guard writes it
-- with every row (keystore.StageOf); guard_key_stage is the same rule in
-- SQL, for the rows written before and for rows an older n8n-guard writes
-- during a rolling upgrade:
--   parked: lost, awaiting_approval, approved, rejected by the reason;
--           else resumed (resume sent), claimed (resume claimed), waiting
--           (keystore.PhaseOf);
--   failed and retryable: by its last history entry that is not an
--           acknowledgement: rerun_gate at_gate, rerun_granted granted,
--           rerun_starting starting, rerun_started started, rerun_refused
--           refused;
--   anything else: ''.
-- The row checksum does not cover the stage: it is computed from the
-- fields the checksum covers, and no decision reads it.
CREATE FUNCTION guard_key_stage(p_state text, p_reason text, p_retryable boolean,
    p_resume_sent_at timestamptz, p_resume_claim_until timestamptz, p_history jsonb) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
SELECT CASE
    WHEN p_state = 'parked' THEN CASE
        WHEN p_reason = 'resume_lost' THEN 'lost'
        WHEN p_reason = 'awaiting_approval' THEN 'awaiting_approval'
        WHEN p_reason = 'approved' THEN 'approved'
        WHEN p_reason = 'approval_rejected' THEN 'rejected'
        WHEN p_resume_sent_at IS NOT NULL THEN 'resumed'
        WHEN p_resume_claim_until IS NOT NULL THEN 'claimed'
        ELSE 'waiting' END
    WHEN p_state = 'failed' AND p_retryable THEN coalesce((
        SELECT CASE e.h->>'event'
            WHEN 'rerun_gate' THEN 'at_gate'
            WHEN 'rerun_granted' THEN 'granted'
            WHEN 'rerun_starting' THEN 'starting'
            WHEN 'rerun_started' THEN 'started'
            WHEN 'rerun_refused' THEN 'refused'
            ELSE '' END
        FROM jsonb_array_elements(p_history) WITH ORDINALITY AS e(h, i)
        WHERE e.h->>'event' NOT IN ('acknowledged', 'snoozed')
        ORDER BY e.i DESC LIMIT 1), '')
    ELSE '' END
$$;

ALTER TABLE guard_keys ADD COLUMN stage text NOT NULL DEFAULT '';

-- The backfill changes no field the checksum covers: the trigger that
-- clears the checksum of a row updated without a new one stays out of it.
ALTER TABLE guard_keys DISABLE TRIGGER guard_keys_checksum;
UPDATE guard_keys SET stage = guard_key_stage(state, reason, retryable, resume_sent_at, resume_claim_until, history)
    WHERE state IN ('parked', 'failed')
      AND guard_key_stage(state, reason, retryable, resume_sent_at, resume_claim_until, history) <> '';
ALTER TABLE guard_keys ENABLE TRIGGER guard_keys_checksum;

-- A row updated without a new checksum was written by an older n8n-guard
-- (or by hand): it knows no stage, so its stage is computed here.
CREATE OR REPLACE FUNCTION guard_keys_checksum_stale() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.checksum IS NOT DISTINCT FROM OLD.checksum THEN
        NEW.checksum := NULL;
        NEW.stage := guard_key_stage(NEW.state, NEW.reason, NEW.retryable, NEW.resume_sent_at, NEW.resume_claim_until, NEW.history);
    END IF;
    RETURN NEW;
END
$$;

-- Likewise a parked or failed row inserted without a stage.
CREATE FUNCTION guard_keys_stage_missing() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.stage := guard_key_stage(NEW.state, NEW.reason, NEW.retryable, NEW.resume_sent_at, NEW.resume_claim_until, NEW.history);
    RETURN NEW;
END
$$;

CREATE TRIGGER guard_keys_stage BEFORE INSERT ON guard_keys
    FOR EACH ROW WHEN (NEW.stage = '' AND NEW.state IN ('parked', 'failed'))
    EXECUTE FUNCTION guard_keys_stage_missing();

-- The keys of a stage (in a namespace), by namespace and key
-- (KeysAtStage).
CREATE INDEX guard_keys_stage ON guard_keys (stage, namespace, key) WHERE stage <> '';
