package notify_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// lookupThen is the real bbolt store; the first Lookup of key runs meanwhile
// after reading, as if those writes landed between a group click's look
// and its resolve.
type lookupThen struct {
	*bolt.Store
	key       string
	meanwhile func()
}

func (l *lookupThen) Lookup(ctx context.Context, ns, key string) (keystore.Result, error) {
	r, err := l.Store.Lookup(ctx, ns, key)
	if key == l.key && l.meanwhile != nil {
		f := l.meanwhile
		l.meanwhile = nil
		f()
	}
	return r, err
}

// A Slack group click decides only the attempt of each member key that the
// message showed: when a person decided a key failed (retryable) meanwhile,
// n8n retried it and the new attempt went unknown too, the old group's
// click leaves the new attempt alone (it has its own message). The window
// is between decideMember's Lookup and its Resolve, which names the attempt.
func TestGroupClickLeavesANewAttemptAlone(t *testing.T) {
	k := newGroupHarness(t, decisionConfig())
	ctx := context.Background()
	k.unknownStorm(10)
	shown := k.lastShown()
	m := buttonValueRE.FindStringSubmatch(shown.Blocks)
	if m == nil {
		t.Fatalf("no button value in %s", shown.Blocks)
	}
	const key = "booking-007"
	race := &lookupThen{Store: k.ks, key: key, meanwhile: func() {
		if _, err := k.ks.Resolve(ctx, keystore.ResolveRequest{Namespace: "bookings", Key: key, Resolution: keystore.StateFailed,
			By: "ops", Note: "did not happen, retry"}); err != nil {
			t.Error(err)
		}
		r, err := k.ks.Reserve(ctx, keystore.ReserveRequest{Namespace: "bookings", Key: key, Owner: "wf-bookings exec 2"})
		if err != nil || r.Outcome != keystore.OutcomeAccepted {
			t.Errorf("retry: %+v %v", r.Outcome, err)
			return
		}
		if _, err := k.ks.Fail(ctx, keystore.FailRequest{Namespace: "bookings", Key: key, Token: r.Token,
			Reason: keystore.ReasonOutcomeUnknown, Message: "timeout again"}); err != nil {
			t.Error(err)
		}
	}}
	k.wireKeys(race, k.ks)
	hdr, body := signed(signingSecret, time.Now(), blockAction("U0OFFICE", ActionComplete, m[1]))
	if err := k.in.Interaction(ctx, hdr, body); err != nil {
		t.Fatal(err)
	}
	k.waitClicks()
	rec := k.key(key)
	if rec.Attempt != 2 {
		t.Fatalf("the retry did not run: attempt %d", rec.Attempt)
	}
	if rec.State != keystore.StateUnknown {
		t.Errorf("the group click (attempt 1's message) decided attempt 2 of %s: %s, history %+v", key, rec.State, rec.History[len(rec.History)-1])
	}
}

// The "Decide in console" link of a message about several parked keys n8n
// lost (KindParkedLost) selects those keys only (state parked, reason
// resume_lost), not the destination's unknown or failed keys nobody in the
// message was asked about.
func TestParkedLostLinkSelectsOnlyTheLostKeys(t *testing.T) {
	ctx := context.Background()
	ks, err := bolt.Open(t.TempDir()+"/keys.db", bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	r, err := ks.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: "other-1", Destination: "hubspot", Owner: "n8n Orders exec 1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: "other-1", Token: r.Token, Reason: keystore.ReasonOutcomeUnknown}); err != nil {
		t.Fatal(err)
	}
	lost := &Record{Header: Header{Kind: KindParkedLost, Count: 3}, KeyPayload: KeyPayload{Namespace: "crm"}, Breaker: Breaker{Destination: "hubspot"}}
	var bulk string
	for _, l := range ConsoleLinks(lost, "https://guard.example.org") {
		if l.Label == "Decide in console" {
			bulk = l.URL
		}
	}
	u, err := url.Parse(bulk)
	if err != nil || bulk == "" {
		t.Fatalf("no bulk link: %q %v", bulk, err)
	}
	f, err := keystore.FilterFromQuery(u.Query(), nil)
	if err != nil {
		t.Fatal(err)
	}
	page, err := keystore.Select(ctx, ks, f, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Items {
		if r.State != keystore.StateParked || r.Reason != keystore.ReasonResumeLost {
			t.Errorf("the parked-lost group's bulk link %s selects %s/%s (%s, %s), which is not a parked key n8n lost", bulk, r.Namespace, r.Key, r.State, r.Reason)
		}
	}
}
