package notify_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	. "github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	slackapi "github.com/n8n-guard/n8n-guard/slack"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/prometheus/client_golang/prometheus"
	bbolt "go.etcd.io/bbolt"
)

// parkWorld is the real bbolt keystore and the notify service on its
// file, with the fake Slack: what a guard runs during an outage.
type parkWorld struct {
	t     *testing.T
	ctx   context.Context
	clock *fakeclock.Clock
	slack *slacktest.Server
	path  string
	store *bolt.Store
	svc   *Service
	logs  *logSink
}

func newParkWorld(t *testing.T) *parkWorld {
	w := &parkWorld{t: t, ctx: context.Background(), clock: newTestClock(), slack: slacktest.New(t),
		path: filepath.Join(t.TempDir(), "guard.db")}
	w.open()
	t.Cleanup(func() { w.store.Close() })
	return w
}

func (w *parkWorld) open() {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: 5 * time.Minute, UnreachableThreshold: 1}}}
	cfg := testConfig()
	cfg.GuardURL, cfg.PublicURL = "https://guard.example.org", "https://guard.example.org"
	cfg.Namespaces = map[string]Route{"crm-contacts": {Owner: "U0OFFICE"}}
	cfg.Destinations = map[string]Route{"hubspot": {Owner: "U0CRM", Channel: "C0CRM"}}
	var err error
	if w.store, err = bolt.Open(w.path, bolt.Options{Policies: pol, Clock: w.clock.Now}); err != nil {
		w.t.Fatal(err)
	}
	outbox, err := notifybolt.New(w.store.DB)
	if err != nil {
		w.t.Fatal(err)
	}
	w.logs = &logSink{}
	w.svc, err = New(cfg, Options{Outbox: outbox, Clock: w.clock.Now, BackoffInitial: time.Second,
		Slack:  slackapi.New(slackapi.Options{Token: "xoxb-test", APIURL: w.slack.APIURL(), HTTPClient: &http.Client{Timeout: 2 * time.Second}}),
		Events: w.store, Keys: w.store, Parking: w.store, Logger: slog.New(w.logs), Registerer: prometheus.NewRegistry()})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *parkWorld) restart() {
	w.t.Helper()
	if err := w.store.Close(); err != nil {
		w.t.Fatal(err)
	}
	w.open()
}

// step is one round of the worker, after the parked counts may be read again.
func (w *parkWorld) step() {
	w.clock.Advance(6 * time.Second)
	w.svc.Step(w.ctx)
}

// openBreaker: the first event finds hubspot unreachable.
func (w *parkWorld) openBreaker() {
	w.t.Helper()
	r, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_first", Destination: "hubspot"})
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.store.Fail(w.ctx, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_first", Token: r.Token,
		Reason: keystore.ReasonDestinationUnreachable, Message: "dial tcp: connection refused"}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *parkWorld) park(from, to int) {
	w.t.Helper()
	for i := from; i <= to; i++ {
		res, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: fmt.Sprintf("evt_%03d", i),
			Destination: "hubspot", ResumeURL: fmt.Sprintf("https://n8n.example.org/webhook-waiting/%d?signature=secret", 1000+i)})
		if err != nil || res.Outcome != keystore.OutcomeParked {
			w.t.Fatalf("park %d: %+v %v", i, res.Outcome, err)
		}
	}
}

// resume does what the catch-up runner and the woken execution do for
// one parked key: claim, n8n's answer, and (accepted) reserve and complete.
func (w *parkWorld) resume(key string, answer keystore.ResumeAnswer) {
	w.t.Helper()
	rec, ok, err := w.store.ClaimResume(w.ctx, "crm-contacts", key, time.Minute)
	if err != nil || !ok {
		w.t.Fatalf("claim %s: %v %v", key, ok, err)
	}
	if _, err := w.store.ResumeAnswered(w.ctx, "crm-contacts", key, *rec.ParkedAt, answer, "n8n answered 404: the execution does not exist"); err != nil {
		w.t.Fatal(err)
	}
	if answer != keystore.ResumeAccepted {
		return
	}
	res, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Destination: "hubspot"})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		w.t.Fatalf("resumed reserve %s: %+v %v", key, res.Outcome, err)
	}
	if _, err := w.store.Complete(w.ctx, keystore.CompleteRequest{Namespace: "crm-contacts", Key: key, Token: res.Token}); err != nil {
		w.t.Fatal(err)
	}
}

// outage returns the posts to the destination's channel and the updates
// of them.
func (w *parkWorld) outage() (posts, updates []slacktest.Call) {
	for _, c := range w.slack.Delivered("") {
		if c.Channel != "C0CRM" {
			continue
		}
		switch c.Method {
		case "chat.postMessage":
			posts = append(posts, c)
		case "chat.update":
			updates = append(updates, c)
		}
	}
	return posts, updates
}

// One outage, one message: posted when the breaker opens, edited in place
// as events park (Slack answering 429 on the way), when the probe closes
// the breaker and when the last parked event is resumed; the lost ones go
// to the namespace's owner in one grouped message.
func TestOutageMessageEditedInPlace(t *testing.T) {
	w := newParkWorld(t)
	w.openBreaker()
	w.step()
	posts, _ := w.outage()
	if len(posts) != 1 || !strings.Contains(posts[0].Shown(), "hubspot unreachable, writes paused for 5 min") {
		t.Fatalf("opening: %+v", posts)
	}

	// Events park; the count reaches the message at most every half window.
	w.park(1, 20)
	w.step()
	w.park(21, 37)
	w.step()
	if _, ups := w.outage(); len(ups) != 0 {
		t.Fatalf("updated before half a window: %+v", ups)
	}
	w.slack.Script("429")
	w.clock.Advance(3 * time.Minute)
	w.step() // 429, Retry-After 1 s
	w.clock.Advance(2 * time.Second)
	w.step()
	_, ups := w.outage()
	if len(ups) != 1 || ups[0].TS != posts[0].TS || !strings.Contains(ups[0].Shown(), "hubspot unreachable — 37 events parked") {
		t.Fatalf("count update: %+v", ups)
	}

	// The cooldown ends: the oldest parked key is the probe; its complete
	// closes the breaker. The message says so, in place.
	w.clock.Advance(5 * time.Minute)
	w.resume("evt_001", keystore.ResumeAccepted)
	closedAt := w.clock.Now()
	w.svc.Step(w.ctx)
	_, ups = w.outage()
	if last := ups[len(ups)-1]; !strings.Contains(last.Shown(), "hubspot back — catching up 37 parked events") || last.TS != posts[0].TS {
		t.Fatalf("closing: %s", last.Shown())
	}
	// The rest follow; n8n lost two of them.
	for i := 2; i <= 37; i++ {
		answer := keystore.ResumeAccepted
		if i == 5 || i == 6 {
			answer = keystore.ResumeLost
		}
		w.resume(fmt.Sprintf("evt_%03d", i), answer)
	}
	w.clock.Set(closedAt.Add(35 * time.Second))
	w.step() // 41 s after the close
	posts, ups = w.outage()
	last := ups[len(ups)-1]
	if len(posts) != 1 || last.TS != posts[0].TS || !strings.Contains(last.Shown(), "hubspot back — caught up: 35 resumed, 2 lost (owner told), took 41 s") ||
		!strings.Contains(last.Shown(), "2 parked executions were no longer held by n8n") {
		t.Fatalf("caught up: %d posts, last update %s", len(posts), last.Shown())
	}

	// The owner of the namespace hears of the lost ones: one message.
	var lost []slacktest.Call
	for _, c := range w.slack.Delivered("chat.postMessage") {
		if strings.Contains(c.Shown(), "Parked event lost in n8n") {
			lost = append(lost, c)
		}
	}
	if len(lost) != 1 {
		t.Fatalf("%d lost messages, want one for the storm", len(lost))
	}
	msg := lost[0].Shown()
	for _, want := range []string{"<@U0OFFICE>", "`evt_005`", "`crm-contacts`", "`hubspot`", "n8n execution 1005",
		"https://n8n.example.org/executions", "Re-send the event from its source", "/v1/resolve"} {
		if !strings.Contains(msg, want) {
			t.Errorf("lost message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(lost[0].Raw, "signature") || strings.Contains(msg, "webhook-waiting") {
		t.Errorf("the resume URL (a capability) is shown: %s", msg)
	}
	w.clock.Advance(3 * time.Minute)
	w.step()
	counted := false
	for _, c := range w.slack.Delivered("") {
		counted = counted || (c.TS == lost[0].TS && strings.Contains(c.Shown(), "*2* parked events of `crm-contacts` (destination `hubspot`) were lost in n8n"))
	}
	if !counted {
		t.Errorf("the lost storm's count was not shown")
	}

	// A restart repeats nothing.
	calls := len(w.slack.Calls())
	w.restart()
	w.clock.Advance(time.Hour)
	w.step()
	if n := len(w.slack.Calls()); n != calls {
		t.Fatalf("%d Slack calls after a restart, was %d", n, calls)
	}
}

// A breaker closed by a person's reset says who and why, and does not
// claim that hubspot takes writes again; the catch-up's end does not
// either.
func TestOutageClosedByReset(t *testing.T) {
	w := newParkWorld(t)
	w.openBreaker()
	w.park(1, 3)
	w.step()
	if _, err := w.store.ResetBreaker(w.ctx, "hubspot", "alice", "the CRM confirmed it is fixed"); err != nil {
		t.Fatal(err)
	}
	w.step()
	posts, ups := w.outage()
	if len(posts) != 1 || len(ups) == 0 {
		t.Fatalf("posts %d, updates %d", len(posts), len(ups))
	}
	shown := ups[len(ups)-1].Shown()
	if !strings.Contains(shown, "hubspot breaker reset by alice — resuming 3 parked events") ||
		!strings.Contains(shown, "alice reset the circuit breaker of `hubspot` at ") || !strings.Contains(shown, " because the CRM confirmed it is fixed. Writes are let through again") ||
		!strings.Contains(shown, "nothing has shown yet that `hubspot` takes them") || strings.Contains(shown, "back") || strings.Contains(shown, "flow again") {
		t.Fatalf("reset: %s", shown)
	}
	for i := 1; i <= 3; i++ {
		w.resume(fmt.Sprintf("evt_%03d", i), keystore.ResumeAccepted)
	}
	w.step()
	_, ups = w.outage()
	shown = ups[len(ups)-1].Shown()
	if !strings.Contains(shown, "hubspot: 3 of 3 parked events resumed in 12 s after a reset by alice") || strings.Contains(shown, "back") ||
		!strings.Contains(shown, "because the CRM confirmed it is fixed") ||
		strings.Contains(shown, "destination_paused") {
		t.Fatalf("after the reset's catch-up: %s", shown)
	}
}

// Keys parked longer than their limit: one grouped message to the
// namespace's owner with what to do, once, also after a restart.
func TestParkedOverdueMessage(t *testing.T) {
	w := newParkWorld(t)
	w.openBreaker()
	w.park(1, 2)
	w.step()
	w.clock.Advance(73 * time.Hour)
	for _, key := range []string{"evt_001", "evt_002"} {
		res, _ := w.store.Lookup(w.ctx, "crm-contacts", key)
		if ok, err := w.store.ParkedOverdue(w.ctx, "crm-contacts", key, *res.Record.ParkedAt, 72*time.Hour); err != nil || !ok {
			t.Fatalf("overdue %s: %v %v", key, ok, err)
		}
	}
	w.step()
	var over []slacktest.Call
	for _, c := range w.slack.Delivered("chat.postMessage") {
		if strings.Contains(c.Shown(), "Event parked too long") {
			over = append(over, c)
		}
	}
	if len(over) != 1 {
		t.Fatalf("%d overdue messages, want 1", len(over))
	}
	for _, want := range []string{"<@U0OFFICE>", "`evt_001`", "`hubspot`", "n8n execution 1001", "parked_limit",
		"https://guard.example.org/v1/destinations", "/v1/resolve", "Open executions in n8n"} {
		if !strings.Contains(over[0].Shown(), want) && !strings.Contains(over[0].Blocks, want) {
			t.Errorf("overdue message lacks %q:\n%s", want, over[0].Shown())
		}
	}
	calls := len(w.slack.Calls())
	w.restart()
	w.clock.Advance(time.Hour)
	w.step()
	w.step()
	for _, c := range w.slack.Calls()[calls:] {
		if strings.Contains(c.Shown(), "Event parked too long") && c.Method == "chat.postMessage" {
			t.Fatalf("posted again after a restart")
		}
	}
}

// A maintenance window is the same message, said as what it is.
func TestOutageMessageOfAMaintenanceWindow(t *testing.T) {
	w := newParkWorld(t)
	if _, err := w.store.HoldDestination(w.ctx, "hubspot", "bob", "CRM upgrade", w.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	w.park(1, 2)
	w.step()
	posts, _ := w.outage()
	if len(posts) != 1 || !strings.Contains(posts[0].Shown(), "hubspot paused for maintenance — 2 events parked") ||
		!strings.Contains(posts[0].Shown(), "maintenance window by bob") || !strings.Contains(posts[0].Shown(), "CRM upgrade") {
		t.Fatalf("maintenance: %+v", posts)
	}
}

// The breaker opens again before the catch-up ended: the first message
// says so (it would otherwise say "catching up" for ever) and a new one
// tells the new outage.
func TestOutageOpenedAgainDuringTheCatchUp(t *testing.T) {
	w := newParkWorld(t)
	w.openBreaker()
	w.park(1, 3)
	w.step()
	if _, err := w.store.ResetBreaker(w.ctx, "hubspot", "alice", "the CRM confirmed it is fixed"); err != nil {
		t.Fatal(err)
	}
	w.step()
	r, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_new", Destination: "hubspot"})
	if err != nil || r.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("after the reset: %+v %v", r.Outcome, err)
	}
	if _, err := w.store.Fail(w.ctx, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_new", Token: r.Token,
		Reason: keystore.ReasonDestinationUnreachable}); err != nil {
		t.Fatal(err)
	}
	w.step()
	posts, ups := w.outage()
	// The new message counts the events still parked.
	if len(posts) != 2 || !strings.Contains(posts[1].Shown(), "hubspot unreachable — 3 events parked") {
		t.Fatalf("posts %+v", posts)
	}
	last := ups[len(ups)-1]
	if last.TS != posts[0].TS || !strings.Contains(last.Shown(), "hubspot back, then paused again at") {
		t.Fatalf("the first outage's message: %s", last.Shown())
	}
}

// A reset with no outage message to edit (the breaker had failures but
// had not opened) is a message of its own that says who and why, never
// "reachable again": no write proved it.
func TestResetWithoutOutageSaysWhoAndWhy(t *testing.T) {
	w := newParkWorld(t)
	r, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_1", Destination: "hubspot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Fail(w.ctx, keystore.FailRequest{Namespace: "crm-contacts", Key: "evt_1", Token: r.Token, Reason: keystore.ReasonDestinationFailed}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.ResetBreaker(w.ctx, "hubspot", "alice", "the CRM vendor fixed the 503s"); err != nil {
		t.Fatal(err)
	}
	w.step()
	w.step()
	var shown []string
	for _, c := range w.slack.Delivered("chat.postMessage") {
		if strings.Contains(c.Shown(), "hubspot") {
			shown = append(shown, c.Shown())
		}
	}
	if len(shown) != 1 {
		t.Fatalf("%d messages about hubspot, want 1: %q", len(shown), shown)
	}
	if s := shown[0]; !strings.Contains(s, "reset by alice") || !strings.Contains(s, "because the CRM vendor fixed the 503s") ||
		strings.Contains(s, "reachable again") || strings.Contains(s, "flow again") {
		t.Fatalf("reset message: %s", s)
	}
}

// A record that fails its checksum reaches its namespace's owner once,
// naming the key and the runbook, however often a guard starts and meets
// it again.
func TestDamagedRecordToldToItsOwnerOnce(t *testing.T) {
	w := newParkWorld(t)
	r, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: "evt_damaged", Owner: "n8n exec 4711"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.Complete(w.ctx, keystore.CompleteRequest{Namespace: "crm-contacts", Key: "evt_damaged", Token: r.Token, ResultRef: "crm-1"}); err != nil {
		t.Fatal(err)
	}
	restart := func(damage bool) {
		t.Helper()
		if err := w.store.Close(); err != nil {
			t.Fatal(err)
		}
		if damage {
			db, err := bbolt.Open(w.path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bbolt.Tx) error {
				b, rk := tx.Bucket([]byte("keys")), []byte("crm-contacts\x00evt_damaged")
				v := bytes.Clone(b.Get(rk))
				v[len(v)-1] ^= 0x01
				return b.Put(rk, v)
			})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		w.open() // the whole-file check after the start meets the damaged record
		testwait.Within(t, 5*time.Second, "the check's record_damaged event", func() bool {
			evs, _ := w.store.RecentEvents(w.ctx, keystore.EventQuery{Limit: 10})
			return len(evs) > 0 && evs[0].Kind == keystore.EventRecordDamaged
		})
		w.step()
		w.step()
	}
	restart(true)
	var told []slacktest.Call
	for _, c := range w.slack.Delivered("chat.postMessage") {
		if strings.Contains(c.Shown(), "Damaged record") {
			told = append(told, c)
		}
	}
	if len(told) != 1 {
		t.Fatalf("%d messages about the damaged record, want 1", len(told))
	}
	for _, want := range []string{"<@U0OFFICE>", "`evt_damaged`", "`crm-contacts`", "record_damaged", `docs/runbooks.md, "A key answers record_damaged"`} {
		if !strings.Contains(told[0].Shown(), want) {
			t.Errorf("the message lacks %q:\n%s", want, told[0].Shown())
		}
	}
	calls := len(w.slack.Calls())
	restart(false)
	for _, c := range w.slack.Calls()[calls:] {
		if strings.Contains(c.Shown(), "Damaged record") && c.Method == "chat.postMessage" {
			t.Fatal("told again after a restart")
		}
	}
}

// A woken execution is not caught up until it reserved again: the outage
// message waits for it, and when it goes silent and is recorded lost the
// closing line counts it lost, also when the loss comes after the outage
// was shown caught up (a restarted guard's sweep finds it later). The
// owner's message says it died after waking, not that n8n deleted it.
func TestOutageWaitsForWokenExecutions(t *testing.T) {
	w := newParkWorld(t)
	w.openBreaker()
	w.park(1, 3)
	w.step()
	w.clock.Advance(5 * time.Minute)
	w.resume("evt_001", keystore.ResumeAccepted) // the probe closes the breaker
	w.resume("evt_002", keystore.ResumeAccepted)
	// evt_003 is woken and its execution dies: it never reserves again.
	rec, ok, err := w.store.ClaimResume(w.ctx, "crm-contacts", "evt_003", time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := w.store.ResumeAnswered(w.ctx, "crm-contacts", "evt_003", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(10 * time.Second)
	w.step()
	w.clock.Advance(time.Minute)
	w.step()
	_, ups := w.outage()
	if last := ups[len(ups)-1].Shown(); strings.Contains(last, "caught up") || !strings.Contains(last, "catching up") {
		t.Fatalf("caught up while an execution is woken and has not reserved: %s", last)
	}
	// Silent past its bound: recorded lost.
	cur, err := w.store.Lookup(w.ctx, "crm-contacts", "evt_003")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.store.ResumeAnswered(w.ctx, "crm-contacts", "evt_003", *cur.Record.ParkedAt, keystore.ResumeSilent, keystore.WokenSilentDetail(cur.Record, 3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	w.step()
	w.clock.Advance(time.Minute)
	w.step()
	_, ups = w.outage()
	if last := ups[len(ups)-1].Shown(); !strings.Contains(last, "caught up: 2 resumed, 1 lost (owner told)") {
		t.Fatalf("closing line: %s", last)
	}
	var lost []string
	for _, c := range w.slack.Delivered("chat.postMessage") {
		if strings.Contains(c.Shown(), "Parked event lost in n8n") {
			lost = append(lost, c.Shown())
		}
	}
	if len(lost) != 1 || !strings.Contains(lost[0], "n8n took the call for n8n execution 1003, but the execution died before it reserved the key again") || strings.Contains(lost[0], "deleted, pruned or cancelled") {
		t.Fatalf("the owner's message about the silent execution: %q", lost)
	}
}
