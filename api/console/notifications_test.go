package console_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	slackapi "github.com/n8n-guard/n8n-guard/slack"
)

// A Slack that refuses the channel, as Slack does: the notification goes
// dead at once (a permanent error), and the console says why.
func TestDeadNotificationShowsWhyAndIsResent(t *testing.T) {
	slack := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":false,"error":"channel_not_found"}`))
	})}
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go slack.Serve(sln)
	t.Cleanup(func() { slack.Close() })

	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	outbox, err := notifybolt.New(store.DB)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{DefaultChannel: "C0GONE", DefaultOwner: "U0ONCALL"},
		notify.Options{Outbox: outbox, PollInterval: 10 * time.Millisecond,
			Slack: slackapi.New(slackapi.Options{Token: "xoxb-test", APIURL: "http://" + sln.Addr().String() + "/api/"})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { notes.Run(runCtx); close(done) }()
	stopWorker := sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stopWorker)
	if _, err := notes.Intake(ctx, []byte(`{"execution":{"id":"77","error":{"message":"HTTP 500"},"lastNodeExecuted":"CRM"},"workflow":{"id":"w1","name":"orders <sync>"}}`)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the notification to go dead", func() bool {
		page, err := notes.List(ctx, notify.ListQuery{Status: notify.StatusDead})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Items) == 1
	})

	s, stop, err := serve(store, notes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	c, _ := signedIn(t, s, actToken)
	_, overview := fetch(t, c, s.url+"/ui")
	if !strings.Contains(overview, `class="warn" href="/ui/notifications?status=dead">1</a>`) {
		t.Errorf("the overview does not count the dead notification:\n%s", overview)
	}
	_, page := fetch(t, c, s.url+"/ui/notifications?status=dead")
	if !strings.Contains(page, "channel_not_found") || !strings.Contains(page, "orders &lt;sync&gt;") {
		t.Errorf("the dead notification's page does not say why it failed:\n%s", page)
	}
	if !strings.Contains(page, "/ui/notifications/resend") {
		t.Fatal("no re-send button on a dead notification")
	}
	// Re-send it from the console (the worker is stopped, so it stays
	// queued for the check instead of meeting the same refusal again).
	stopWorker()
	m := regexp.MustCompile(`name="id" value="([^"]+)"`).FindStringSubmatch(page)
	c2, csrf := signedIn(t, s, actToken)
	resp := postForm(t, c2, s.url+"/ui/notifications/resend", url.Values{"csrf": {csrf}, "id": {m[1]}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("re-send: %d", resp.StatusCode)
	}
	pending, err := notes.List(ctx, notify.ListQuery{Status: notify.StatusPending})
	if err != nil || len(pending.Items) != 1 || pending.Items[0].ID != m[1] || pending.Items[0].Attempts != 0 {
		t.Fatalf("after the re-send, pending: %+v %v", pending.Items, err)
	}
	// A read token sees the dead list but not the button.
	reader, _ := signedIn(t, s, readToken)
	if _, page := fetch(t, reader, s.url+"/ui/notifications"); strings.Contains(page, "/ui/notifications/resend") {
		t.Error("a read token is offered the re-send button")
	}
}
