package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A parked event n8n woke is shown as woken, waiting for its execution,
// on the overview, the breakers list and the destination's page: not as
// parked (it no longer waits for the catch-up) and not as nothing.
func TestWokenEventsAreShown(t *testing.T) {
	s, store := siteOn(t, keystore.Policies{
		Destinations: map[string]keystore.DestinationPolicy{"hubspot": {UnreachableThreshold: 1, Cooldown: time.Millisecond}}})
	s.parkedKey("crm", "evt-1", "hubspot", n8nBase+"/webhook-waiting/81")
	s.parkedKey("crm", "evt-2", "hubspot", n8nBase+"/webhook-waiting/82")
	// The claim is refused until the 1 ms cooldown has passed.
	var rec *keystore.Record
	testwait.For(t, "evt-1 claimed once the cooldown passed", func() bool {
		r, ok, err := store.ClaimResume(s.ctx, "crm", "evt-1", time.Minute)
		if err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
		rec = r
		return ok
	})
	if _, err := store.ResumeAnswered(s.ctx, "crm", "evt-1", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
		t.Fatal(err)
	}

	c, _ := signedIn(t, s, actToken)
	for _, p := range []struct{ path, want string }{
		{"/ui", "1 parked</a>, 1 woken"},
		{"/ui/breakers", `<span class="woken">1 woken</span>`},
		{"/ui/destination?name=hubspot", `<dd id="dest-woken">1</dd>`},
		{"/ui/destination?name=hubspot", "1 woken, waiting for their executions to reserve again"},
	} {
		if _, page := fetch(t, c, s.url+p.path); !strings.Contains(page, p.want) {
			t.Errorf("%s does not show %q", p.path, p.want)
		}
	}
	if _, page := fetch(t, c, s.url+"/ui/destination?name=hubspot"); !strings.Contains(page, `<dd id="dest-parked">1</dd>`) {
		t.Errorf("the destination's page does not count the other event as parked")
	}
}
