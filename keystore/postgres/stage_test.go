package postgres_test

import (
	"context"
	"testing"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
)

// version19 takes a database back to schema version 19: what migrations
// 0020 (the stage), 0021 (its trigger for older writers), 0022 (the wait
// indexes) and 0023 (the figures of a caught_up event) added is dropped,
// as if its rows were written before.
var version19 = []string{
	`ALTER TABLE guard_events DROP COLUMN resumed, DROP COLUMN lost, DROP COLUMN took_ms`, // 0023
	`DELETE FROM guard_schema_migrations WHERE version = 23`,
	`DROP INDEX guard_keys_waits`, // 0022
	`DROP INDEX guard_keys_waits_destination`,
	`DELETE FROM guard_schema_migrations WHERE version = 22`,
	`DROP TRIGGER guard_keys_stage_kept ON guard_keys`, // 0021
	`DROP FUNCTION guard_keys_stage_kept()`,
	`DELETE FROM guard_schema_migrations WHERE version = 21`,
	`DROP INDEX guard_keys_stage`,
	`DROP TRIGGER guard_keys_stage ON guard_keys`,
	`DROP FUNCTION guard_keys_stage_missing()`,
	`CREATE OR REPLACE FUNCTION guard_keys_checksum_stale() RETURNS trigger
	LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.checksum IS NOT DISTINCT FROM OLD.checksum THEN
			NEW.checksum := NULL;
		END IF;
		RETURN NEW;
	END
	$$`,
	`ALTER TABLE guard_keys DROP COLUMN stage`,
	`DROP FUNCTION guard_key_stage(text, text, boolean, timestamptz, timestamptz, jsonb)`,
	`DELETE FROM guard_schema_migrations WHERE version = 20`,
}

// Migration 0020 gives the rows of version 19 the stage their fields and
// history say (keystore.PhaseOf, the re-run history), in the column and
// its index, and leaves their checksums as they were. A row an older
// n8n-guard writes afterwards (an update without a new checksum, an
// insert without a stage) gets its stage from the database.
func (pg *pgEnv) testStageMigration(t *testing.T) {
	ctx := context.Background()
	u := pg.freshSchema(t)
	clock := fakeclock.New()
	opts := postgres.Options{Clock: clock.Now, Policies: storetest.StagePolicies}
	s := openPostgres(t, u, opts)
	want := storetest.EveryStage(t, s, clock.Advance)
	sums := func() map[string]int64 {
		t.Helper()
		rows, err := s.Pool().Query(ctx, `SELECT namespace || '/' || key, coalesce(checksum, 0) FROM guard_keys`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string]int64{}
		for rows.Next() {
			var k string
			var sum int64
			if err := rows.Scan(&k, &sum); err != nil {
				t.Fatal(err)
			}
			out[k] = sum
		}
		return out
	}
	before := sums()
	for _, sql := range version19 {
		if _, err := s.Pool().Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	s.Close()
	s = openPostgres(t, u, opts) // migrates to 20, 21, 22 and 23
	defer s.Close()
	storetest.WantStages(t, s, want)
	after := sums()
	for k, sum := range before {
		if sum == 0 || after[k] != sum {
			t.Errorf("%s: checksum %d before the migration, %d after", k, sum, after[k])
		}
	}
	// An older n8n-guard grants the re-run of a key at its gate (its
	// update sets no checksum), and inserts a parked key without a stage.
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`UPDATE guard_keys SET history = history || '[{"at":"2026-11-30T09:05:00Z","event":"rerun_granted","attempt":1,"by":"Ana"}]'::jsonb
		WHERE namespace = 'crm-contacts' AND key = 'at_gate'`)
	exec(`INSERT INTO guard_keys (namespace, key, state, attempt, created_at, updated_at, destination, parked_at, resume_url, reason, retryable)
		VALUES ('crm-contacts', 'old_parked', 'parked', 1, now(), now(), 'd-wait', now(), 'http://n8n.local/webhook-waiting/9', 'destination_unreachable', true)`)
	want[storetest.StagedKey{Namespace: "crm-contacts", Key: "at_gate"}] = keystore.StageGranted
	want[storetest.StagedKey{Namespace: "crm-contacts", Key: "old_parked"}] = keystore.PhaseWaiting
	storetest.WantStages(t, s, want)
}

// An older n8n-guard writing a row during a rolling upgrade sets a new
// checksum with every update, as every write of version 18 does: the
// database still gives the row the stage its fields say. A grant it
// wrote is found by the re-run worker of a newer guard (granted, not
// left in the index at its gate), and a key it moved out of a stage
// leaves that stage's queue.
func (pg *pgEnv) testStageOfAnOlderWrite(t *testing.T) {
	ctx := context.Background()
	clock := fakeclock.New()
	s := openPostgres(t, pg.freshSchema(t), postgres.Options{Clock: clock.Now, Policies: storetest.StagePolicies})
	defer s.Close()
	storetest.EveryStage(t, s, clock.Advance)
	for _, c := range []struct {
		key, set string
		want     keystore.Stage
	}{
		{"at_gate", `history = history || '[{"at":"2026-11-30T09:05:00Z","event":"rerun_granted","attempt":1,"by":"Ana"}]'::jsonb`, keystore.StageGranted},
		{"p_waiting", `state = 'completed', reason = '', parked_at = NULL, resume_url = ''`, ""},
	} {
		// Version 18's update: every column it knows, and a new checksum.
		if _, err := s.Pool().Exec(ctx, `UPDATE guard_keys SET `+c.set+`, version = version + 1, checksum = coalesce(checksum, 0) + 1
			WHERE namespace = 'crm-contacts' AND key = $1`, c.key); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := s.Pool().QueryRow(ctx, `SELECT stage FROM guard_keys WHERE namespace = 'crm-contacts' AND key = $1`, c.key).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if keystore.Stage(got) != c.want {
			t.Errorf("%s written by an older n8n-guard: stage %q in the column (and its index), want %q", c.key, got, c.want)
		}
	}
}
