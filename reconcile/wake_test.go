package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/reconcile"
	"github.com/prometheus/client_golang/prometheus"
)

// lookCounter counts the runner's looks at the held keys: a look has
// read the store once HeldForCheck returned.
type lookCounter struct {
	store
	looks atomic.Int32
}

func (c *lookCounter) HeldForCheck(ctx context.Context, limit int) ([]*keystore.Record, error) {
	defer c.looks.Add(1)
	return c.store.HeldForCheck(ctx, limit)
}

// A key that goes unknown is a commit of the store: it wakes the runner,
// which asks the key's check at once, although its interval is an hour.
func TestAKeyGoneUnknownIsCheckedWithoutWaitingForATick(t *testing.T) {
	s := &lookCounter{store: openBolt(t)}
	fake, srv := newFakeCheck(t, map[string]string{"evt_1": "found:crm-1"})
	runner(t, s, srv, prometheus.NewRegistry(), func(o *reconcile.Options) { o.Interval = time.Hour })
	testwait.For(t, "the runner's first look, which finds nothing: it then waits for the hour", func() bool { return s.looks.Load() > 0 })
	unknown(t, s, "evt_1", "")
	testwait.Value(t, testwait.Deadline, "the key checked after going unknown (calls of its check)", func() (int, bool) {
		return fake.callsOf("evt_1"), settled(s, "evt_1")()
	})
	if r, err := s.Lookup(t.Context(), ns, "evt_1"); err != nil || r.Record.State != keystore.StateCompleted {
		t.Fatalf("the checked key: %+v %v", r.Record, err)
	}
}
