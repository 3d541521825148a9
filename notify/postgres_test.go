package notify_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
	notifypg "github.com/n8n-guard/n8n-guard/notify/postgres"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// The outbox on PostgreSQL, shared by replicas. Runs against
// N8N_GUARD_PG_URL, or a throwaway cluster; skips loudly without server
// binaries, except under CI=true, where it fails.
func TestPostgresOutbox(t *testing.T) {
	base := pgtest.URL(t, "the PostgreSQL outbox tests")
	testPostgresOutbox(t, func(t *testing.T) string { return pgtest.FreshSchema(t, base) })
}

// The same through PgBouncer 1.18 in transaction pooling mode (a
// database per test, default_query_exec_mode=exec; see
// keystore/postgres's TestPostgresThroughPgBouncer).
func TestPostgresOutboxThroughPgBouncer(t *testing.T) {
	base := pgtest.URL(t, "the PostgreSQL outbox tests through PgBouncer")
	via := pgtest.BouncerURL(t, base, "the PostgreSQL outbox tests through PgBouncer")
	testPostgresOutbox(t, func(t *testing.T) string { return pgtest.FreshDatabase(t, base, via) })
}

// testPostgresOutbox runs the outbox's tests; schema gives each an empty
// database (or schema) of its own.
func testPostgresOutbox(t *testing.T, schema func(t *testing.T) string) {
	replica := func(t *testing.T, url, name string) Outbox {
		pool, err := pgxpool.New(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		o, err := notifypg.New(context.Background(), pool, notifypg.Options{Replica: name})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	withOutbox := func(o Outbox) func(*harnessOptions) { return func(opts *harnessOptions) { opts.Outbox = o } }

	t.Run("outage then recovery, restart", func(t *testing.T) {
		const n = 10
		slack := slacktest.New(t)
		h := newHarness(t, slack, testConfig(), withOutbox(replica(t, schema(t), "a")))
		// The replica takes back its own claims at once after the outage.
		restartMidOutage(t, h, slack, n)
		h.clock.Advance(31 * 24 * time.Hour)
		if n, err := h.svc.Outbox().Purge(context.Background(), h.clock.Now().Add(-30*24*time.Hour), h.clock.Now(), 100); err != nil || n != 10 {
			t.Fatalf("purge: %d %v", n, err)
		}
	})

	t.Run("two replicas deliver each notification once", func(t *testing.T) {
		const n = 40
		url := schema(t)
		slack := slacktest.New(t)
		a := newHarness(t, slack, testConfig(), withOutbox(replica(t, url, "a")))
		b := newHarness(t, slack, testConfig(), withOutbox(replica(t, url, "b")))
		for i := range n {
			h := []*harness{a, b}[i%2]
			h.intake(failureBody(fmt.Sprintf("wf-%d", i), "Node", "boom", fmt.Sprint(i)))
		}
		stepTogether(5, a, b)
		assertDeliveredOnce(t, a, slack, n)
	})

	t.Run("two guards escalate each step once", func(t *testing.T) {
		url := schema(t)
		slack := slacktest.New(t)
		a := newHarness(t, slack, decisionConfig(), withOutbox(replica(t, url, "a")))
		b := newHarness(t, slack, decisionConfig(), withOutbox(replica(t, url, "b")))
		for i := range 10 {
			a.intake(failureBody(fmt.Sprintf("orders-%d", i), "POST to CRM", "HTTP 503", fmt.Sprint(i)))
		}
		a.pass()
		for _, h := range []*harness{a, b} {
			h.clock.Advance(31 * time.Minute)
		}
		stepTogether(5, a, b)
		escalations := 0
		for _, c := range slack.Delivered("chat.postMessage") {
			if strings.Contains(c.Blocks, "Escalated") {
				escalations++
			}
		}
		if escalations != 10 || len(a.list("")) != 20 {
			t.Fatalf("10 failures past their 30 min step on two guards: %d escalation messages, %d notifications; want 10 and 20",
				escalations, len(a.list("")))
		}
	})

	t.Run("one group across replicas", func(t *testing.T) {
		url := schema(t)
		a := newHarness(t, nil, testConfig(), withOutbox(replica(t, url, "a")))
		b := newHarness(t, nil, testConfig(), withOutbox(replica(t, url, "b")))
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h := []*harness{a, b}[i%2]
				if _, err := h.svc.Intake(context.Background(), []byte(failureBody("orders-sync", "HTTP Request", "HTTP 503", fmt.Sprint(i)))); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		items := a.list("")
		if len(items) != 1 || items[0].Count != 20 {
			t.Fatalf("20 copies of one failure on two replicas: %d notifications, first count %d; want 1 with count 20", len(items), items[0].Count)
		}
	})

	t.Run("each keystore event becomes one notification", func(t *testing.T) {
		url := schema(t)
		ctx := context.Background()
		ks, err := postgres.Open(ctx, url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer ks.Close()
		for i := range 7 {
			key := fmt.Sprintf("evt_%d", i)
			r, err := ks.Reserve(ctx, keystore.ReserveRequest{Namespace: fmt.Sprintf("ns-%d", i), Key: key})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ks.Fail(ctx, keystore.FailRequest{Namespace: fmt.Sprintf("ns-%d", i), Key: key, Token: r.Token, Reason: keystore.ReasonOutcomeUnknown}); err != nil {
				t.Fatal(err)
			}
		}
		events := func(opts *harnessOptions) { opts.Events = ks }
		a := newHarness(t, nil, testConfig(), withOutbox(replica(t, url, "a")), events)
		b := newHarness(t, nil, testConfig(), withOutbox(replica(t, url, "b")), events)
		var wg sync.WaitGroup
		for _, h := range []*harness{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); h.svc.ConsumeEvents(ctx) }()
		}
		wg.Wait()
		total := 0
		for _, it := range a.list("") {
			if it.Kind == KindKeyUnknown {
				total += it.Count
			}
		}
		if total != 7 {
			t.Fatalf("7 keys went unknown; the outbox counts %d", total)
		}
		if c, err := a.svc.Outbox().EventCursor(ctx); err != nil || c != 7 {
			t.Fatalf("event cursor %d %v", c, err)
		}
	})
}

// stepTogether runs n worker rounds on each guard, the guards at once.
func stepTogether(n int, guards ...*harness) {
	var wg sync.WaitGroup
	for _, h := range guards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				h.svc.Step(context.Background())
			}
		}()
	}
	wg.Wait()
}
