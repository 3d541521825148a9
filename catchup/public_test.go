package catchup_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// n8n's WEBHOOK_URL is public, the guard reaches n8n privately: the keys
// park with resume URLs of the public origin (where nobody listens here),
// and the catch-up calls each at the private address, with the resume
// URL's own path and query and the resume credential. Two addresses, one
// execution woken per key, nothing lost.
func TestCatchUpCallsThePublicResumeURLsAtThePrivateAddress(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 1, UnreachableThreshold: 1}}}
	clock := &outageClock{}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// The public origin: an address nobody listens at (a call there is
	// refused, and the key would stay parked).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + l.Addr().String()
	l.Close()

	fake, unused := startFakeN8n(t, store)
	unused.Close()
	var mu sync.Mutex
	var seen []string // what reached the private address: path and query
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.RequestURI())
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	defer srv.Close()

	parkBehindAnOutage(t, store, fake, public, clock.Advance, 2)
	clock.Advance(time.Hour) // the cooldown is over

	targets, err := keystore.ResumeTargets{}.WithPublic(public, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lines{}
	runUntil(t, catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Logger: slog.New(logs),
		Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targets}, Interval: 20 * time.Millisecond, Claim: 5 * time.Second, Poll: 10 * time.Millisecond},
		fake, "caught up", func() bool { return len(logs.matching("caught up: 2 resumed")) == 1 }, func() string {
			mu.Lock()
			defer mu.Unlock()
			return "calls at the private address: " + strings.Join(seen, ", ") + "; log: " + strings.Join(logs.matching(""), " | ")
		})
	for _, key := range []string{"evt_00", "evt_01"} {
		if res, err := store.Lookup(context.Background(), ns, key); err != nil || res.Record.State != keystore.StateCompleted {
			t.Fatalf("%s: %+v %v", key, res.Record, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "/webhook-waiting/0" || seen[1] != "/webhook-waiting/1" {
		t.Fatalf("the private address got %q, want the resume URLs' paths /webhook-waiting/0 and /webhook-waiting/1", seen)
	}
}
