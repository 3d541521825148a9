package notify_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSlack answers the Slack Web API methods notify calls, the way Slack
// does, and can misbehave like it: 429 with Retry-After, 5xx with an HTML
// body, {"ok":false,"error":"channel_not_found"}, slow answers, and no
// answer at all (Off closes the listener: connections are refused).
type fakeSlack struct {
	t    testing.TB
	addr string

	mu     sync.Mutex
	srv    *http.Server
	script []string // answers for the next calls, then mode
	mode   string   // ok | 429 | 5xx | channel_not_found | invalid_auth | slow
	retry  int      // Retry-After seconds for 429
	slow   time.Duration
	calls  []slackCall
	ts     int
	users  map[string]string   // e-mail → user ID
	groups map[string][]string // user group ID → member user IDs
	// history: the messages posted, per channel, as conversations.history
	// returns them (with their metadata).
	history map[string][]map[string]any
}

// slackCall is one request the fake answered.
type slackCall struct {
	Method  string
	Channel string
	TS      string
	Text    string
	Blocks  string
	Raw     string // the request body as sent
	Answer  string
}

func newFakeSlack(t testing.TB) *fakeSlack {
	f := &fakeSlack{t: t, mode: "ok", retry: 1, users: map[string]string{}, groups: map[string][]string{},
		history: map[string][]map[string]any{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(f.Off)
	return f
}

func (f *fakeSlack) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(f.handle), ReadHeaderTimeout: 5 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go srv.Serve(ln)
}

// APIURL is the value for Options.APIURL (slack-go's form).
func (f *fakeSlack) APIURL() string { return "http://" + f.addr + "/api/" }

// Off stops answering: the port is closed, connections are refused.
func (f *fakeSlack) Off() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// On answers again, on the same address.
func (f *fakeSlack) On() {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", f.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		f.t.Fatalf("fake Slack cannot listen again: %v", err)
	}
	f.serve(ln)
}

func (f *fakeSlack) SetMode(mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
}

// Script makes the next calls answer these modes, in order.
func (f *fakeSlack) Script(modes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, modes...)
}

func (f *fakeSlack) Calls() []slackCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]slackCall(nil), f.calls...)
}

// Delivered returns the calls Slack accepted.
func (f *fakeSlack) Delivered(method string) []slackCall {
	var out []slackCall
	for _, c := range f.Calls() {
		if c.Answer == "ok" && (method == "" || c.Method == method) {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeSlack) handle(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	vals, _ := url.ParseQuery(string(raw))
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	// Slack takes the token from the form too; the e2e fake (and Slack's
	// advice) wants the header, so that is what this fake checks.
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")

	f.mu.Lock()
	mode := f.mode
	if len(f.script) > 0 {
		mode, f.script = f.script[0], f.script[1:]
	}
	if token != "xoxb-test" {
		mode = "invalid_auth"
	}
	call := slackCall{Method: method, Channel: vals.Get("channel"), TS: vals.Get("ts"),
		Text: vals.Get("text"), Blocks: readable(vals.Get("blocks")), Raw: string(raw), Answer: mode}
	if method == "chat.postMessage" && (mode == "ok" || mode == "slow") {
		// The message lands before a slow answer: a client that gives up
		// waiting does not know it did.
		f.ts++
		call.TS = fmt.Sprintf("1700000000.%06d", f.ts)
		msg := map[string]any{"type": "message", "ts": call.TS, "text": call.Text}
		var meta map[string]any
		if json.Unmarshal([]byte(vals.Get("metadata")), &meta) == nil {
			msg["metadata"] = meta
		}
		f.history[call.Channel] = append([]map[string]any{msg}, f.history[call.Channel]...)
	}
	history := append([]map[string]any(nil), f.history[vals.Get("channel")]...)
	members := f.groups[vals.Get("usergroup")]
	f.calls = append(f.calls, call)
	retry, slow := f.retry, f.slow
	userID := f.users[strings.ToLower(vals.Get("email"))]
	f.mu.Unlock()

	switch mode {
	case "429":
		w.Header().Set("Retry-After", fmt.Sprint(retry))
		writeSlackJSON(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	case "5xx":
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "<html><body>Service Unavailable</body></html>")
		return
	case "channel_not_found", "invalid_auth", "not_in_channel":
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": false, "error": mode})
		return
	case "slow":
		select {
		case <-time.After(slow):
		case <-r.Context().Done():
			return
		}
	}
	switch method {
	case "users.lookupByEmail":
		if userID == "" {
			writeSlackJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "users_not_found"})
			return
		}
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": true, "user": map[string]any{"id": userID, "name": "x"}})
	case "chat.postMessage", "chat.update":
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": true, "channel": call.Channel, "ts": call.TS})
	case "chat.postEphemeral":
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": true, "message_ts": "1700000001.000001"})
	case "views.open":
		if vals.Get("trigger_id") == "" && !strings.Contains(string(raw), "trigger_id") {
			writeSlackJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_trigger_id"})
			return
		}
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": true, "view": map[string]any{"id": "V0REASON", "type": "modal"}})
	case "conversations.history":
		if vals.Get("include_all_metadata") != "1" {
			for i, m := range history { // Slack leaves metadata out unless asked
				c := maps.Clone(m)
				delete(c, "metadata")
				history[i] = c
			}
		}
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": true, "messages": history, "has_more": false})
	case "usergroups.users.list":
		if members == nil {
			writeSlackJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "no_such_subteam"})
			return
		}
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": true, "users": members})
	default:
		writeSlackJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// Shown returns the texts of the blocks as a person reads them (Slack
// turns &lt; &gt; &amp; back into < > &).
func (c slackCall) Shown() string {
	var v any
	_ = json.Unmarshal([]byte(c.Blocks), &v)
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for _, k := range []string{"text", "url"} {
				if s, ok := x[k].(string); ok {
					b.WriteString(s + "\n")
				}
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(v)
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(b.String())
}

// readable re-encodes blocks JSON without HTML escapes, so tests can look
// for "<@U…>" as a person would see it.
func readable(blocks string) string {
	var v any
	if json.Unmarshal([]byte(blocks), &v) != nil {
		return blocks
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

func writeSlackJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// countingTransport counts the requests that left the process, answered
// or not (a refused connection never reaches the fake).
type countingTransport struct {
	mu   sync.Mutex
	n    int
	next http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *countingTransport) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
