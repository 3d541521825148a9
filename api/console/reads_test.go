package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// readCounter is a store that counts the records it hands the console:
// every read that returns keys (List, Select, KeysAtStage, ParkedByWait
// in overdue_reads_test.go, Lookup) adds what it returned.
type readCounter struct {
	keystore.Store
	read atomic.Int64
}

func (s *readCounter) List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error) {
	p, err := s.Store.List(ctx, q)
	s.read.Add(int64(len(p.Items)))
	return p, err
}

func (s *readCounter) Select(ctx context.Context, f keystore.Filter, cursor string, limit int) (keystore.Page, error) {
	p, err := s.Store.Select(ctx, f, cursor, limit)
	s.read.Add(int64(len(p.Items)))
	return p, err
}

func (s *readCounter) KeysAtStage(ctx context.Context, q keystore.StageQuery) ([]*keystore.Record, error) {
	recs, err := s.Store.KeysAtStage(ctx, q)
	s.read.Add(int64(len(recs)))
	return recs, err
}

func (s *readCounter) Lookup(ctx context.Context, ns, key string) (keystore.Result, error) {
	res, err := s.Store.Lookup(ctx, ns, key)
	if res.Record != nil {
		s.read.Add(1)
	}
	return res, err
}

// outageKeys is how many keys the outage site holds: all but three wait
// for their destination, which is down.
const outageKeys = 5000

// outageSite is a console over outageKeys keys in an outage: hubspot's
// breaker is open and every key of crm-contacts waits for it, parked
// (not overdue: the namespace's parked_limit is the default 3 days).
// Three need a person: invoices/inv-1 awaits approval, crm-contacts/lost-1
// was lost by n8n, bookings/unk-1's outcome is unknown.
func outageSite(t testing.TB) (*site, *readCounter) {
	t.Helper()
	pol := parkingDestinations(keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		"invoices": {Approval: keystore.ApprovalPolicy{Required: true}}}}, "hubspot")
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	counter := &readCounter{Store: store}
	s, stop, err := serve(counter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx := s.ctx
	// lost-1 opens hubspot's breaker (an unreachable write), parks, and
	// n8n answers its resume 404.
	res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "lost-1", Destination: "hubspot", Owner: "n8n exec 1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: "crm-contacts", Key: "lost-1", Token: res.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: "http://n8n.local/webhook-waiting/1"}); err != nil {
		t.Fatal(err)
	}
	if res, err = store.Lookup(ctx, "crm-contacts", "lost-1"); err != nil || res.Record == nil || res.Record.ParkedAt == nil {
		t.Fatalf("lost-1 is not parked: %+v %v", res.Record, err)
	}
	if _, err := store.ResumeAnswered(ctx, "crm-contacts", "lost-1", *res.Record.ParkedAt, keystore.ResumeLost, "n8n answered 404"); err != nil {
		t.Fatal(err)
	}
	if res, err = store.Reserve(ctx, keystore.ReserveRequest{Namespace: "bookings", Key: "unk-1", Owner: "n8n exec 2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: "bookings", Key: "unk-1", Token: res.Token, Reason: keystore.ReasonOutcomeUnknown}); err != nil {
		t.Fatal(err)
	}
	if res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "invoices", Key: "inv-1", Owner: "n8n exec 3",
		RequestedBy: "ann", ResumeURL: "http://n8n.local/webhook-waiting/3", Fingerprint: "invoice inv-1"}); err != nil || res.Outcome != keystore.OutcomeParked {
		t.Fatalf("reserve inv-1: %+v %v", res, err)
	}
	// The waiting keys, written as n8n's executions do: many at once.
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i <= outageKeys-3; i = int(next.Add(1)) {
				key := fmt.Sprintf("evt-%05d", i)
				res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Destination: "hubspot",
					Owner: "n8n exec " + strconv.Itoa(i), ResumeURL: "http://n8n.local/webhook-waiting/" + strconv.Itoa(i)})
				if err != nil || res.Outcome != keystore.OutcomeParked {
					errc <- fmt.Errorf("park %s: %v %v", key, res.Outcome, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	counter.read.Store(0)
	return s, counter
}

// The console finds what needs a person through the store's queries of
// the keys at a stage, not by reading every parked key: in an outage of
// 5,000 keys of which three need a person, the approvals page reads the
// one key awaiting approval, and the overview reads the three and, for
// the overdue ones, at most one bounded page of the keys that wait (an
// overdue key is one that waited too long, a time, not a stored stage).
func TestNeedsAPersonReadsTheKeysThatNeedOne(t *testing.T) {
	s, counter := outageSite(t)
	act, _ := signedIn(t, s, actToken)
	limited, _ := signedIn(t, s, limitedToken) // bookings and hubspot only

	pages := []struct {
		name, path  string
		c           *http.Client
		max         int64
		shows, hide []string
	}{
		{"approvals", "/ui/approvals", act, 1, []string{`id="approval-inv-1"`}, nil},
		// The three (the unknown one twice: its group and the list of
		// waiting keys), and one page of the keys that wait, told apart
		// for overdue (needsScan and one more, which says "more").
		{"overview", "/ui/", act, 4 + 1001, []string{`data-need="approval"`, `data-need="lost"`, `data-need="unknown"`}, nil},
		// A token of other namespaces reads theirs only: the unknown key
		// of bookings, twice.
		{"overview of a limited token", "/ui/", limited, 2, []string{`data-need="unknown"`}, []string{`data-need="approval"`, `data-need="lost"`}},
		{"approvals of a limited token", "/ui/approvals", limited, 0, nil, []string{`id="approval-inv-1"`}},
	}
	for _, p := range pages {
		counter.read.Store(0)
		_, body := fetch(t, p.c, s.url+p.path)
		read := counter.read.Load()
		t.Logf("%s: %d records read of %d keys", p.name, read, outageKeys)
		for _, want := range p.shows {
			if !strings.Contains(body, want) {
				t.Errorf("%s does not show %s", p.name, want)
			}
		}
		for _, not := range p.hide {
			if strings.Contains(body, not) {
				t.Errorf("%s shows %s, of a namespace the token does not cover", p.name, not)
			}
		}
		if read > p.max {
			t.Errorf("%s read %d records of %d keys to show what needs a person, want at most %d", p.name, read, outageKeys, p.max)
		}
	}
}

// The overview of the outage site, one load per iteration:
//
//	go test -run XXX -bench OverviewInAnOutage -benchtime 50x ./api/console/
func BenchmarkOverviewInAnOutage(b *testing.B) {
	s, counter := outageSite(b)
	c := client(b)
	resp, err := c.PostForm(s.url+"/ui/signin", url.Values{"token": {actToken}})
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	counter.read.Store(0)
	b.ResetTimer()
	for range b.N {
		resp, err := c.Get(s.url + "/ui/")
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("overview: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	b.ReportMetric(float64(counter.read.Load())/float64(b.N), "records/load")
}
