package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
	slackapi "github.com/n8n-guard/n8n-guard/slack"

	"github.com/gorilla/websocket"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// fakeSocket is Slack's Socket Mode end: apps.connections.open (with the
// app-level token) answers a WebSocket URL; on it the fake says hello,
// sends envelopes and collects the acknowledgements, as Slack does.
type fakeSocket struct {
	t   *testing.T
	srv *httptest.Server

	mu    sync.Mutex
	conn  *websocket.Conn
	acks  map[string]time.Time // envelope_id → when acknowledged
	opens int
}

func newFakeSocket(t *testing.T) *fakeSocket {
	f := &fakeSocket{t: t, acks: map[string]time.Time{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/apps.connections.open", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer xapp-test" {
			slacktest.Answer(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth"})
			return
		}
		f.mu.Lock()
		f.opens++
		f.mu.Unlock()
		slacktest.Answer(w, http.StatusOK, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/link"})
	})
	// slack-go dials with Slack's own origin.
	up := websocket.Upgrader{CheckOrigin: func(r *http.Request) bool { return r.Header.Get("Origin") == "https://api.slack.com" }}
	mux.HandleFunc("/link", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		// One writer at a time on a WebSocket: the hello under the lock
		// that send takes too.
		f.mu.Lock()
		_ = c.WriteJSON(map[string]any{"type": "hello", "num_connections": 1,
			"connection_info": map[string]any{"app_id": "A0GUARD"}, "debug_info": map[string]any{"host": "fake"}})
		f.conn = c
		f.mu.Unlock()
		for {
			var ack struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if err := c.ReadJSON(&ack); err != nil {
				return
			}
			f.mu.Lock()
			f.acks[ack.EnvelopeID] = time.Now()
			f.mu.Unlock()
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// send delivers one interactive envelope and returns when it was sent.
func (f *fakeSocket) send(id string, payload any) time.Time {
	f.t.Helper()
	testwait.For(f.t, "a Socket Mode connection", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.conn != nil
	})
	raw, _ := json.Marshal(payload)
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.conn.WriteJSON(map[string]any{"envelope_id": id, "type": "interactive",
		"payload": json.RawMessage(raw), "accepts_response_payload": false}); err != nil {
		f.t.Fatal(err)
	}
	return time.Now()
}

func (f *fakeSocket) acked(id string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.acks[id]
	return t, ok
}

// drop closes the WebSocket as Slack does when it refreshes a connection.
func (f *fakeSocket) drop() {
	f.mu.Lock()
	c := f.conn
	f.conn = nil
	f.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

func TestSocketModeClick(t *testing.T) {
	k := newKeysHarness(t)
	sock := newFakeSocket(t)
	socket := slackapi.NewSocketMode("xapp-test", slackapi.Options{APIURL: sock.srv.URL + "/api/"}, harnessClicks{k.harness}, nil)
	n := k.unknownKey("booking-77")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- socket.Run(ctx) }()
	defer func() { cancel(); <-done }()

	for i, user := range []string{"U0STRANGER", "U0OFFICE"} {
		env := fmt.Sprintf("env-%d", i)
		sent := sock.send(env, blockAction(user, ActionComplete, n.ID))
		testwait.For(t, "the acknowledgement", func() bool { _, ok := sock.acked(env); return ok })
		if at, _ := sock.acked(env); at.Sub(sent) > 3*time.Second {
			t.Fatalf("acknowledged after %s, Slack wants 3 s", at.Sub(sent))
		}
		if i == 0 {
			testwait.For(t, "the refusal", func() bool { return len(k.calls("chat.postEphemeral")) == 1 })
			if k.key("booking-77").State != keystore.StateUnknown {
				t.Fatal("a stranger's click over Socket Mode changed the key")
			}
			// Slack refreshes the connection; the next click still arrives.
			sock.drop()
		}
	}
	testwait.For(t, "the decision", func() bool { return k.key("booking-77").State == keystore.StateCompleted })
	k.waitClicks()
	k.pass()
	if u := k.calls("chat.update"); len(u) != 1 || !strings.Contains(u[0].Blocks, "marked it *completed*") {
		t.Fatalf("updates: %+v", u)
	}
	if sock.opens < 2 {
		t.Fatalf("did not reconnect after the drop: %d opens", sock.opens)
	}
}
