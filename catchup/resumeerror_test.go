package catchup_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// A resume call that gets no answer (n8n down: connection refused) says
// so in the key's record and the guard's log in n8n's short words, never
// with the client's whole error: that names the resume URL, and n8n 2.x's
// carries the execution's signature. The call is tried until the claim's
// retries end; the key stays parked, its message and history untouched.
func TestAResumeCallsClientErrorKeepsNoResumeURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close() // nothing listens: every call is refused
	const secretPart = "s1gn4ture-of-execution-77"
	resumeURL := base + "/webhook-waiting/77?signature=" + secretPart

	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, UnreachableThreshold: 1}}}
	clock := &stepClock{now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_down", Destination: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_down", Token: res.Token,
		Reason: keystore.ReasonDestinationUnreachable, Message: "crm refused", ResumeURL: resumeURL}); err != nil || f.Outcome != keystore.OutcomeParked {
		t.Fatalf("park: %+v %v", f, err)
	}
	clock.Advance(time.Hour) // the cooldown is over: the key is resumed

	logs := &lines{}
	r, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Sleep: clock.Sleep, Logger: slog.New(logs),
		Resumer:  &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, base)},
		Interval: time.Second, Claim: 2 * time.Minute, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- r.Run(rctx) }()
	const gaveUp = "n8n did not take the resume call"
	if !testwait.Poll(testwait.Deadline, func() bool { return len(logs.matching(gaveUp)) > 0 }) {
		cancel()
		<-stopped
		t.Fatalf("no line %q within %s: %q", gaveUp, testwait.Deadline, logs.matching(""))
	}
	cancel()
	<-stopped

	line := logs.matching(gaveUp)[0]
	if !strings.Contains(line, "n8n could not be reached") || !strings.Contains(line, "connection refused") {
		t.Errorf("the line does not say n8n could not be reached: %s", line)
	}
	got, err := store.Lookup(ctx, ns, "evt_down")
	if err != nil || got.Record == nil || got.Record.State != keystore.StateParked {
		t.Fatalf("the key: %+v %v", got.Record, err)
	}
	rec := got.Record
	kept := []string{"message " + rec.Message}
	for _, h := range rec.History {
		kept = append(kept, "history "+string(h.Event)+" "+h.Detail)
	}
	for _, l := range logs.matching("") {
		kept = append(kept, "log "+l)
	}
	for _, k := range kept {
		for _, leak := range []string{secretPart, "webhook-waiting/77"} { // the origin is the operator's: it may be named
			if strings.Contains(k, leak) {
				t.Errorf("%q holds %q of the resume URL", k, leak)
			}
		}
	}
	if rec.Message != "crm refused" {
		t.Errorf("the key's message is %q, want the fail's own", rec.Message)
	}
}
