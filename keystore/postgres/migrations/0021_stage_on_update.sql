-- n8n-guard keystore on PostgreSQL, version 21: the stage of a row an
-- older n8n-guard updates. Every update of version 18 sets a new checksum,
-- so 0020's guard_keys_checksum_stale (an update without one) never sees
-- it, and the stage column kept what it was: a grant an older guard wrote
-- during a rolling upgrade stayed in the index at its gate, and the
-- re-run worker of a newer guard, which reads only granted keys, never
-- started it. An update that leaves the stage as it was (an older
-- n8n-guard never sets it) gets the stage its fields say, by the rule of
-- 0020 (guard_key_stage). n8n-guard's own writes agree with it
-- (keystore.StageOf), so for them this changes nothing; rows that are
-- neither parked nor failed and had no stage are left out of it.
CREATE FUNCTION guard_keys_stage_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.stage := guard_key_stage(NEW.state, NEW.reason, NEW.retryable, NEW.resume_sent_at, NEW.resume_claim_until, NEW.history);
    RETURN NEW;
END
$$;

CREATE TRIGGER guard_keys_stage_kept BEFORE UPDATE ON guard_keys
    FOR EACH ROW WHEN (NEW.stage IS NOT DISTINCT FROM OLD.stage AND (NEW.state IN ('parked', 'failed') OR OLD.stage <> ''))
    EXECUTE FUNCTION guard_keys_stage_kept();
