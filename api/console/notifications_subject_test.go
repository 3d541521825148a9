package console_test

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	slackapi "github.com/n8n-guard/n8n-guard/slack"
)

// A notification that is not about a failed execution says what it is
// about: an outage names its destination, a lost parked key its
// namespace and key, each a link to its page (the list showed only
// "breaker_opened"). The API lists the same as extension fields.
func TestNotificationsSayWhatTheyAreAbout(t *testing.T) {
	slack := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true,"channel":"C0ALERTS","ts":"1700000000.000100"}`))
	})}
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go slack.Serve(sln)
	t.Cleanup(func() { slack.Close() })

	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: parkingDestinations(keystore.Policies{}, "hubspot")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	outbox, err := notifybolt.New(store.DB)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{DefaultChannel: "C0ALERTS", DefaultOwner: "U0ONCALL"},
		notify.Options{Outbox: outbox, PollInterval: 10 * time.Millisecond, Events: store,
			Slack: slackapi.New(slackapi.Options{Token: "xoxb-test", APIURL: "http://" + sln.Addr().String() + "/api/"})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { notes.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	s, stop, err := serve(store, notes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	s.lostKey("crm", "lead-7", "hubspot", n8nBase+"/webhook-waiting/7") // opens hubspot's breaker, then n8n lost the execution
	items := testwait.Value(t, testwait.Deadline, "an outage and a lost-key notification", func() ([]notify.Notification, bool) {
		page, err := notes.List(context.Background(), notify.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[notify.Kind]bool{}
		for _, n := range page.Items {
			kinds[n.Kind] = true
		}
		return page.Items, kinds[notify.KindBreakerOpened] && kinds[notify.KindParkedLost]
	})
	for _, n := range items {
		switch n.Kind {
		case notify.KindBreakerOpened:
			if n.Destination != "hubspot" {
				t.Errorf("the outage's notification lists destination %q", n.Destination)
			}
		case notify.KindParkedLost:
			if n.Namespace != "crm" || n.Key != "lead-7" {
				t.Errorf("the lost key's notification lists %q/%q", n.Namespace, n.Key)
			}
		}
	}
	c, _ := signedIn(t, s, actToken)
	_, page := fetch(t, c, s.url+"/ui/notifications")
	for _, want := range []string{`<span class="kind" title="breaker_opened">destination paused</span>`, `<span class="kind" title="parked_lost">parked event lost</span>`, `<a class="dest" href="/ui/destination?name=hubspot">hubspot</a>`, `<a class="subject" href="/ui/key?key=lead-7&amp;namespace=crm">crm/lead-7</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the notifications page lacks %s", want)
		}
	}
}
