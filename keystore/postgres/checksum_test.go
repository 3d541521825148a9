package postgres_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// A row changed beneath the store (damage does not go through the
// table's triggers: they are disabled for the change) is never decided
// on: the key answers record_damaged naming it, nothing is written over
// it, once in the log and to Options.Damaged; the rest goes on. Rows from
// before checksums get theirs at the next start, logged with the count.
func (pg *pgEnv) testChecksums(t *testing.T) {
	ctx := context.Background()
	u := pg.freshSchema(t)
	s := openPostgres(t, u, postgres.Options{})
	for _, key := range []string{"done", "other"} {
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: key})
		if err != nil || r.Outcome != keystore.OutcomeAccepted {
			t.Fatalf("reserve: %s %v", r.Outcome, err)
		}
		if _, err := s.Complete(ctx, keystore.CompleteRequest{Namespace: "crm", Key: key, Token: r.Token, ResultRef: "crm-contact-1"}); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER TABLE guard_keys DISABLE TRIGGER guard_keys_checksum`)
	exec(`UPDATE guard_keys SET state = 'failed', retryable = true, reason = 'destination_failed' WHERE key = 'done'`)
	exec(`ALTER TABLE guard_keys ENABLE TRIGGER guard_keys_checksum`)
	s.Close()

	var logged logbuf.Buffer
	damaged := 0
	s = openPostgres(t, u, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)), Damaged: func() { damaged++ }})
	defer s.Close()
	for range 3 {
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "done"})
		if r.Outcome == keystore.OutcomeAccepted {
			t.Fatal("the damaged completed key was accepted again")
		}
		if errs.CodeOf(err) != errs.RecordDamaged || !strings.Contains(err.Error(), "crm/done") {
			t.Fatalf("reserve: want record_damaged naming crm/done, got %v", err)
		}
	}
	if _, err := s.Lookup(ctx, "crm", "done"); errs.CodeOf(err) != errs.RecordDamaged {
		t.Fatalf("lookup: %v", err)
	}
	if _, err := s.Resolve(ctx, keystore.ResolveRequest{Namespace: "crm", Key: "done", Resolution: keystore.StateCompleted, By: "ops", Note: "checked", Force: true}); errs.CodeOf(err) != errs.RecordDamaged {
		t.Fatalf("resolve: %v", err)
	}
	page, err := s.List(ctx, keystore.ListQuery{Namespace: "crm"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("listing next to a damaged row: %d items %v", len(page.Items), err)
	}
	if r, err := s.Lookup(ctx, "crm", "other"); err != nil || r.Record.State != keystore.StateCompleted {
		t.Fatalf("another key: %v", err)
	}
	var state string
	if err := s.Pool().QueryRow(ctx, `SELECT state FROM guard_keys WHERE key = 'done'`).Scan(&state); err != nil || state != "failed" {
		t.Fatalf("the damaged row was written over: %s %v", state, err)
	}
	if damaged != 1 || strings.Count(logged.String(), "failed its checksum") != 1 {
		t.Fatalf("want one Damaged call and one log line; %d calls, log:\n%s", damaged, logged.String())
	}

	// A hand-made UPDATE (a person's decision, through the trigger)
	// drops the checksum; the next start adds it again, and says so.
	exec(`UPDATE guard_keys SET state = 'completed', retryable = false, reason = '' WHERE key = 'done'`)
	if r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "done"}); err != nil || r.Outcome != keystore.OutcomeDuplicate {
		t.Fatalf("after the repair by hand: %s %v", r.Outcome, err)
	}
	logged = logbuf.Buffer{}
	s2 := openPostgres(t, u, postgres.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	defer s2.Close()
	if !strings.Contains(logged.String(), "added a checksum") || !strings.Contains(logged.String(), "rows=1") {
		t.Fatalf("the next start does not add the checksum:\n%s", logged.String())
	}
	var missing int
	if err := s.Pool().QueryRow(ctx, `SELECT count(*) FROM guard_keys WHERE checksum IS NULL`).Scan(&missing); err != nil || missing != 0 {
		t.Fatalf("%d rows without a checksum %v", missing, err)
	}
}

// The park fields (migration 0005) are in the checksum: a parked row whose
// resume_url, parked_at or resume claim changes beneath the store, or a
// row that was never parked and gains a resume_url, answers
// record_damaged; a row without park fields verifies as before.
func (pg *pgEnv) testParkChecksums(t *testing.T) {
	ctx := context.Background()
	u := pg.freshSchema(t)
	s := openPostgres(t, u, postgres.Options{})
	defer s.Close()
	if _, err := s.HoldDestination(ctx, "hubspot", "ops", "CRM upgrade", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"url", "since", "claim"} {
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Destination: "hubspot", ResumeURL: "http://n8n/webhook-waiting/" + key})
		if err != nil || r.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve %s: %s %v", key, r.Outcome, err)
		}
	}
	r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "plain"})
	if err != nil || r.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("reserve: %s %v", r.Outcome, err)
	}
	for _, key := range []string{"url", "since", "claim", "plain"} {
		if _, err := s.Lookup(ctx, "crm", key); err != nil {
			t.Fatalf("lookup %s before any damage: %v", key, err)
		}
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`ALTER TABLE guard_keys DISABLE TRIGGER guard_keys_checksum`)
	exec(`UPDATE guard_keys SET resume_url = 'http://elsewhere/webhook-waiting/1' WHERE key = 'url'`)
	exec(`UPDATE guard_keys SET parked_at = parked_at - interval '1 day' WHERE key = 'since'`)
	exec(`UPDATE guard_keys SET resume_claim_until = now() + interval '1 hour' WHERE key = 'claim'`)
	exec(`UPDATE guard_keys SET resume_url = 'http://n8n/webhook-waiting/9' WHERE key = 'plain'`)
	exec(`ALTER TABLE guard_keys ENABLE TRIGGER guard_keys_checksum`)
	for _, key := range []string{"url", "since", "claim", "plain"} {
		if _, err := s.Lookup(ctx, "crm", key); errs.CodeOf(err) != errs.RecordDamaged {
			t.Errorf("lookup %s after a park field changed beneath the store: want record_damaged, got %v", key, err)
		}
	}
}
