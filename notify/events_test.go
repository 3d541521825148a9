package notify_test

import (
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	slackapi "github.com/n8n-guard/n8n-guard/slack"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/prometheus/client_golang/prometheus"
)

// The keystore's real bbolt store writes the events; notify reads them from
// the same file and alerts the configured owners, once.
func TestKeystoreEventsToSlack(t *testing.T) {
	ctx := context.Background()
	clock := newTestClock()
	slack := slacktest.New(t)
	path := filepath.Join(t.TempDir(), "guard.db")
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"hubspot": {Cooldown: 5 * time.Minute, FailureThreshold: 5, UnreachableThreshold: 1, Owner: "U0CRM"}}}
	cfg := testConfig()
	cfg.GuardURL = "https://guard.example.org/"
	cfg.Namespaces = map[string]Route{"crm-contacts": {Owner: "U0OFFICE",
		Runbook: "Search HubSpot for the contact by the event ID; if it exists, resolve as completed."}}
	cfg.Destinations = map[string]Route{"hubspot": {Owner: "U0CRM", Channel: "C0CRM"}}

	var store *bolt.Store
	var svc *Service
	logs := &logSink{}
	open := func() {
		var err error
		store, err = bolt.Open(path, bolt.Options{Policies: pol, Clock: clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		outbox, err := notifybolt.New(store.DB)
		if err != nil {
			t.Fatal(err)
		}
		svc, err = New(cfg, Options{Outbox: outbox, Clock: clock.Now,
			Slack:  slackapi.New(slackapi.Options{Token: "xoxb-test", APIURL: slack.APIURL(), HTTPClient: &http.Client{Timeout: 2 * time.Second}}),
			Events: store, Logger: slog.New(logs), Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
	}
	open()
	defer func() { store.Close() }()

	reserve := func(key, dest string) keystore.Result {
		t.Helper()
		r, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key,
			Owner: "n8n exec 4711", Lease: time.Minute, Destination: dest})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fail := func(key, token string, reason keystore.Reason, msg string) {
		t.Helper()
		if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: "crm-contacts", Key: key, Token: token,
			Reason: reason, Message: msg}); err != nil {
			t.Fatal(err)
		}
	}

	// A key goes unknown: the holder could not tell whether the write happened.
	r := reserve("evt_1", "")
	fail("evt_1", r.Token, keystore.ReasonOutcomeUnknown, "timeout after 30 s talking to CRM, contact jane@example.com")
	svc.Step(ctx)
	posts := slack.Delivered("chat.postMessage")
	if len(posts) != 1 {
		t.Fatalf("posts %d", len(posts))
	}
	p := posts[0]
	for _, want := range []string{"<@U0OFFICE>", "evt_1", "crm-contacts", "Search HubSpot for the contact",
		`curl -X POST https://guard.example.org/v1/resolve -H "Authorization: Bearer $N8N_GUARD_TOKEN" -H 'Content-Type: application/json' -d '{"namespace":"crm-contacts","key":"evt_1","resolution":"completed","by":"<your name>","note":"<what you checked>"}'`,
		"outcome_unknown"} {
		if !strings.Contains(p.Shown(), want) {
			t.Errorf("key_unknown message lacks %q:\n%s", want, p.Blocks)
		}
	}
	if strings.Contains(p.Raw, "jane") || p.Channel != "C0ALERTS" {
		t.Errorf("channel %s / e-mail leaked: %s", p.Channel, p.Blocks)
	}

	// A second key of the namespace runs out of lease: same storm, one message.
	reserve("evt_2", "")
	clock.Advance(2 * time.Minute)
	if _, err := store.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	svc.Step(ctx)
	if n := len(slack.Delivered("chat.postMessage")); n != 1 {
		t.Fatalf("second stuck key posted again (%d posts)", n)
	}

	// The destination becomes unreachable: the breaker opens.
	r = reserve("evt_3", "hubspot")
	fail("evt_3", r.Token, keystore.ReasonDestinationUnreachable, "dial tcp: connection refused")
	reserve("evt_4", "hubspot") // paused
	reserve("evt_5", "hubspot") // paused
	svc.Step(ctx)
	posts = slack.Delivered("chat.postMessage")
	if len(posts) != 2 {
		t.Fatalf("posts %d after the breaker opened", len(posts))
	}
	if b := posts[1].Blocks; !strings.Contains(b, "hubspot unreachable, writes paused for 5 min") ||
		!strings.Contains(b, "<@U0CRM>") || posts[1].Channel != "C0CRM" {
		t.Fatalf("breaker_opened message: %s", b)
	}

	// Cooldown over: a probe goes through and completes; the breaker closes.
	clock.Advance(6 * time.Minute)
	r = reserve("evt_6", "hubspot")
	if r.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("probe: %s", r.Outcome)
	}
	if _, err := store.Complete(ctx, keystore.CompleteRequest{Namespace: "crm-contacts", Key: "evt_6", Token: r.Token}); err != nil {
		t.Fatal(err)
	}
	svc.Step(ctx)
	// The outage's message is edited in place: no second message.
	posts = slack.Delivered("chat.postMessage")
	if len(posts) != 2 {
		t.Fatalf("posts %d after the breaker closed", len(posts))
	}
	// The grouped stuck key count reaches Slack as well, half a window on.
	svc.Step(ctx)
	var inPlace, count int
	for _, u := range slack.Delivered("chat.update") {
		switch {
		case u.TS == posts[1].TS && strings.Contains(u.Blocks, "hubspot reachable again") && strings.Contains(u.Blocks, "2 reserves were paused"):
			inPlace++
		case u.TS == posts[0].TS && strings.Contains(u.Blocks, "*2* keys of `crm-contacts` went unknown"):
			count++
		}
	}
	if inPlace != 1 || count != 1 {
		t.Fatalf("breaker closing in place of %s: %d, stuck keys' count: %d; updates %+v", posts[1].TS, inPlace, count, slack.Delivered("chat.update"))
	}

	// A restart neither loses nor repeats an alert: the cursor is durable.
	calls := len(slack.Calls())
	store.Close()
	open()
	clock.Advance(time.Hour)
	svc.Step(ctx)
	if len(slack.Calls()) != calls {
		t.Fatalf("alerts repeated after a restart: %d calls, was %d", len(slack.Calls()), calls)
	}
	// The cursor itself is durable (the once-keys are only a second guard).
	if cur, err := svc.Outbox().EventCursor(ctx); err != nil || cur == 0 {
		t.Fatalf("event cursor %d after a restart (%v)", cur, err)
	} else if rest, _ := store.Events(ctx, cur, 10); len(rest) != 0 {
		t.Fatalf("%d events behind the durable cursor", len(rest))
	}
	kinds := map[Kind]int{}
	for _, n := range mustList(t, svc) {
		kinds[n.Kind]++
		if n.Status != StatusDelivered {
			t.Errorf("%s not delivered: %+v", n.Kind, n)
		}
	}
	if kinds[KindKeyUnknown] != 1 || kinds[KindBreakerOpened] != 1 || kinds[KindBreakerClosed] != 0 {
		t.Fatalf("notifications by kind: %v", kinds)
	}
}

func mustList(t *testing.T, s *Service) []Notification {
	t.Helper()
	p, err := s.List(context.Background(), ListQuery{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return p.Items
}

// events is a scripted event log, for what the real store does not easily
// produce: the same key reported unknown twice.
type events []keystore.Event

func (e events) Events(_ context.Context, after uint64, limit int) ([]keystore.Event, error) {
	var out []keystore.Event
	for _, ev := range e {
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

func TestStuckKeyAlertedOnce(t *testing.T) {
	slack := slacktest.New(t)
	at := newTestClock().Now()
	src := events{
		{Seq: 1, At: at, Kind: keystore.EventKeyUnknown, Namespace: "ns", Key: "k1", Attempt: 1, Reason: keystore.ReasonLeaseExpired},
		{Seq: 2, At: at, Kind: keystore.EventKeyUnknown, Namespace: "ns", Key: "k1", Attempt: 1, Reason: keystore.ReasonOutcomeUnknown},
		{Seq: 3, At: at, Kind: "something_new"},
	}
	h := newHarness(t, slack, testConfig(), func(o *harnessOptions) { o.Events = src })
	h.pass()
	h.clock.Advance(time.Hour) // any count update would be due
	h.pass()
	if n := len(slack.Calls()); n != 1 {
		t.Fatalf("%d Slack calls for one stuck key", n)
	}
	items := h.list("")
	if len(items) != 1 || items[0].Count != 1 {
		t.Fatalf("outbox %+v", items)
	}
}
