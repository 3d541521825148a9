package reconcile_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/reconcile"
)

func claimUntil(t *testing.T, s store, key string) time.Time {
	t.Helper()
	r, err := s.Lookup(context.Background(), ns, key)
	if err != nil || r.Record == nil || r.Record.Check == nil || r.Record.Check.ClaimUntil == nil {
		return time.Time{}
	}
	return *r.Record.Check.ClaimUntil
}

// A check whose call runs past its claim's length keeps the claim: the
// other guard on the store never calls it meanwhile.
func TestACheckCallPastItsClaimIsCalledOnce(t *testing.T) {
	s := openBolt(t)
	f, srv := newFakeCheck(t, map[string]string{"evt_1": "wait"})
	var freed sync.Once
	free := func() { freed.Do(func() { close(f.release) }) }
	t.Cleanup(free) // a failed test ends the calls before the fake's server closes
	unknown(t, s, "evt_1", "")
	const claim = 300 * time.Millisecond
	slow := func(o *reconcile.Options) {
		o.Claim = claim
		o.Checks["crm-lookup"].(*n8n.CheckCaller).Timeout = time.Minute
	}
	runner(t, s, srv, nil, slow)
	runner(t, s, srv, nil, slow)
	testwait.For(t, "the check to be called", func() bool { return f.callsOf("evt_1") == 1 })
	first := claimUntil(t, s, "evt_1")
	// Extended at or after the first claim's end: the other guard looked
	// at a key whose first claim had lapsed, every 20 ms meanwhile.
	testwait.For(t, "the claim to be extended past two claims", func() bool {
		if n := f.callsOf("evt_1"); n > 1 {
			t.Fatalf("the check was called %d times while its first call was in flight", n)
		}
		return claimUntil(t, s, "evt_1").After(first.Add(2 * claim))
	})
	if n := f.callsOf("evt_1"); n != 1 {
		t.Fatalf("the check was called %d times while its first call was in flight", n)
	}
	free()
	testwait.For(t, "the answer", settled(s, "evt_1"))
	if n := f.callsOf("evt_1"); n != 1 || f.maxIn != 1 {
		t.Fatalf("%d calls, %d at once; want one", n, f.maxIn)
	}
}

// A guard stopped mid-call hands the check's claim back at once and
// counts no claim: the next guard asks without waiting for the claim to
// lapse (an hour here).
func TestAStoppedGuardHandsTheCheckBack(t *testing.T) {
	s := openBolt(t)
	f, srv := newFakeCheck(t, map[string]string{"evt_1": "hang"})
	unknown(t, s, "evt_1", "")
	hour := func(o *reconcile.Options) {
		o.Claim = time.Hour
		o.Checks["crm-lookup"].(*n8n.CheckCaller).Timeout = time.Minute
	}
	stop := runner(t, s, srv, nil, hour)
	testwait.For(t, "the check to be called", func() bool { return f.callsOf("evt_1") == 1 })
	stop()
	r, _ := s.Lookup(context.Background(), ns, "evt_1")
	if h := r.Record.Check; h == nil || h.ClaimUntil != nil || h.Claims != 0 {
		t.Fatalf("after the stop the check is %+v, want held, unclaimed, no claim counted", h)
	}
	f.mu.Lock()
	f.answers["evt_1"] = "found:crm-9"
	f.mu.Unlock()
	runner(t, s, srv, nil, hour)
	testwait.For(t, "the next guard to settle the key", settled(s, "evt_1"))
	if n := f.callsOf("evt_1"); n != 2 {
		t.Fatalf("%d calls, want 2 (the stopped one and the next guard's)", n)
	}
}
