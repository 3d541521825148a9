package console_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/keystore/storetest"
)

func (s *readCounter) ParkedByWait(ctx context.Context, q keystore.WaitQuery) ([]*keystore.Record, error) {
	recs, err := s.Store.ParkedByWait(ctx, q)
	s.read.Add(int64(len(recs)))
	return recs, err
}

// waitingKeys is how many keys wait for hubspot on the overdue site.
const waitingKeys = 1500

// overdueSite is a console over waitingKeys keys of crm parked for
// hubspot, of which three (old-1..old-3) waited past crm's parked_limit
// of an hour and the rest parked a minute ago, and two keys parked for
// salesforce a minute ago.
func overdueSite(t *testing.T) (*site, *readCounter) {
	t.Helper()
	c := storetest.NewClock()
	// Near the wall clock: the session cookie's expiry is the console's.
	c.Advance(time.Now().Add(-3 * time.Hour).Truncate(time.Millisecond).Sub(c.Now()))
	pol := parkingDestinations(keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"crm": {ParkedLimit: time.Hour}}}, "hubspot", "salesforce")
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	park := func(key, dest string) {
		t.Helper()
		res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Destination: dest, Owner: "n8n exec " + key,
			ResumeURL: "http://n8n.local/webhook-waiting/" + key})
		if err != nil || res.Outcome != keystore.OutcomeParked {
			t.Errorf("park %s: %v %v", key, res.Outcome, err)
		}
	}
	for _, dest := range []string{"hubspot", "salesforce"} {
		res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "opens-" + dest, Destination: dest, Owner: "n8n exec 0"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: "opens-" + dest, Token: res.Token, Reason: keystore.ReasonDestinationUnreachable}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 3; i++ {
		park(fmt.Sprintf("old-%d", i), "hubspot")
	}
	c.Advance(2 * time.Hour)
	park("sf-1", "salesforce")
	c.Advance(time.Second)
	park("sf-2", "salesforce")
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i <= waitingKeys-3; i = int(next.Add(1)) {
				park(fmt.Sprintf("evt-%05d", i), "hubspot")
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	c.Advance(time.Minute)
	counter := &readCounter{Store: store}
	s, stop, err := serveConfig(console.Config{Store: counter, Parking: store, SignIn: signIn, Policies: pol, Clock: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s, counter
}

// The overdue parked keys are read from the store's index of the wait,
// up to their namespace's parked_limit: of 1,500 keys waiting for
// hubspot, the overview reads the three that waited too long and shows
// them as one row; the parked list of a destination reads that
// destination's keys, a page of them, the longest waiting (the overdue
// ones) first.
func TestOverdueParkedKeysAreReadFromTheWaitIndex(t *testing.T) {
	s, counter := overdueSite(t)
	act, _ := signedIn(t, s, actToken)

	counter.read.Store(0)
	_, body := fetch(t, act, s.url+"/ui/")
	if read := counter.read.Load(); read != 3 {
		t.Errorf("the overview read %d records of %d waiting keys, want the 3 overdue ones", read, waitingKeys)
	}
	row := regexp.MustCompile(`(?s)<li class="need need-overdue" data-need="overdue">.*?</li>`).FindString(body)
	if !strings.Contains(row, `<span class="need-count">3</span>`) || !strings.Contains(row, "parked executions overdue: parked longer than the namespace&#39;s parked_limit") ||
		!strings.Contains(row, "crm → hubspot") || !strings.Contains(row, "2h") {
		t.Errorf("the overdue row: %q", row)
	}
	if strings.Count(body, `data-need="overdue"`) != 1 {
		t.Errorf("the overview shows %d overdue rows, want one (crm → hubspot)", strings.Count(body, `data-need="overdue"`))
	}

	counter.read.Store(0)
	_, body = fetch(t, act, s.url+"/ui/parked?destination=salesforce")
	if read := counter.read.Load(); read != 2 {
		t.Errorf("the parked list of salesforce read %d records, want its 2 keys", read)
	}
	if rows := regexp.MustCompile(`<tr data-key="([^"]+)" class="parked-([a-z_]+)">`).FindAllStringSubmatch(body, -1); len(rows) != 2 ||
		rows[0][1] != "sf-1" || rows[0][2] != "waiting" || rows[1][1] != "sf-2" || rows[1][2] != "waiting" {
		t.Errorf("salesforce's parked rows: %v", rows)
	}

	counter.read.Store(0)
	_, body = fetch(t, act, s.url+"/ui/parked?destination=hubspot")
	if read := counter.read.Load(); read > 101 {
		t.Errorf("the parked list of hubspot read %d records for a page of 100, want at most 101", read)
	}
	rows := regexp.MustCompile(`<tr data-key="([^"]+)" class="parked-([a-z_]+)">`).FindAllStringSubmatch(body, -1)
	if len(rows) != 100 || rows[0][1] != "old-1" || rows[2][1] != "old-3" || rows[2][2] != "overdue" || rows[3][2] != "waiting" ||
		!strings.Contains(body, "3 overdue on this page") || !strings.Contains(body, "Next page") {
		t.Errorf("hubspot's first page: %d rows, first %v", len(rows), rows[:min(len(rows), 4)])
	}
}
