package reconcile_test

import (
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/reconcile"
	"github.com/prometheus/client_golang/prometheus"
)

// A key that goes unknown is a commit of the store: it wakes the runner,
// which asks the key's check at once, although its interval is an hour.
func TestAKeyGoneUnknownIsCheckedWithoutWaitingForATick(t *testing.T) {
	s := openBolt(t)
	fake, srv := newFakeCheck(t, map[string]string{"evt_1": "found:crm-1"})
	runner(t, s, srv, prometheus.NewRegistry(), func(o *reconcile.Options) { o.Interval = time.Hour })
	time.Sleep(200 * time.Millisecond) // its first look found nothing: it waits for the hour
	unknown(t, s, "evt_1", "")
	for giveUp := time.Now().Add(5 * time.Second); !settled(s, "evt_1")(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(giveUp) {
			t.Fatalf("the key was not checked within 5 s of going unknown (%d calls)", fake.callsOf("evt_1"))
		}
	}
	if r, err := s.Lookup(t.Context(), ns, "evt_1"); err != nil || r.Record.State != keystore.StateCompleted {
		t.Fatalf("the checked key: %+v %v", r.Record, err)
	}
}
