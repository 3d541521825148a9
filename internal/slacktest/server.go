package slacktest

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

// Token is the bot token the Server accepts; any other is invalid_auth.
const Token = "xoxb-test"

// Server answers the Slack Web API methods the guard calls, the way Slack
// does, records every call, and can misbehave like Slack: a mode (or a
// script of modes for the next calls) makes it answer
//
//	"ok"                as Slack does when all is well
//	"429"               429 with Retry-After (SetRetryAfter, 1 s by default)
//	"5xx"               503 with an HTML body
//	"slow"              the answer after SetSlow's delay (the message lands first)
//	"timeout"           no answer until the client gives up
//	any other word      {"ok":false,"error":<word>}, e.g. "channel_not_found"
//
// and Off closes its port: connections are refused until On.
type Server struct {
	t    testing.TB
	addr string

	mu       sync.Mutex
	srv      *http.Server
	script   []string // modes for the next calls, then mode
	mode     string
	retry    int // Retry-After seconds of a 429
	slow     time.Duration
	calls    []Call
	ts       int
	users    map[string]string   // e-mail → user ID
	groups   map[string][]string // user group ID → member user IDs
	channels map[string]string   // channel → the error Slack answers for it
	// history: the messages posted, per channel, newest first, as
	// conversations.history returns them (with their metadata).
	history map[string][]map[string]any
}

// Call is one request the Server answered.
type Call struct {
	Method      string
	Channel     string
	TS          string
	Text        string
	Blocks      string // as a person reads them: no HTML escapes
	Attachments string
	Raw         string // the request body as sent
	Answer      string // the mode it was answered with
}

// New starts a Server on a loopback port for the test; it is closed when
// the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	f := &Server{t: t, mode: "ok", retry: 1, users: map[string]string{}, groups: map[string][]string{},
		channels: map[string]string{}, history: map[string][]map[string]any{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.serve(ln)
	t.Cleanup(f.Off)
	return f
}

func (f *Server) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(f.handle), ReadHeaderTimeout: 5 * time.Second}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go srv.Serve(ln)
}

// APIURL is the Web API's base URL in slack-go's form (trailing slash).
func (f *Server) APIURL() string { return "http://" + f.addr + "/api/" }

// Off stops answering: the port is closed, connections are refused.
func (f *Server) Off() {
	f.mu.Lock()
	srv := f.srv
	f.srv = nil
	f.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// On answers again, on the same address.
func (f *Server) On() {
	var ln net.Listener
	var err error
	// The port may take a moment to be free again after Off.
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

// SetMode sets how the calls after the script are answered.
func (f *Server) SetMode(mode string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = mode
}

// Script makes the next calls answer these modes, in order.
func (f *Server) Script(modes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, modes...)
}

// SetRetryAfter sets the Retry-After, in seconds, of a 429.
func (f *Server) SetRetryAfter(seconds int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retry = seconds
}

// SetSlow sets how long a "slow" answer takes.
func (f *Server) SetSlow(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.slow = d
}

// AddUser makes users.lookupByEmail find id for email.
func (f *Server) AddUser(email, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users[strings.ToLower(email)] = id
}

// AddGroup makes usergroups.users.list answer members for group.
func (f *Server) AddGroup(group string, members ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groups[group] = members
}

// FailChannel makes every call about channel answer {"ok":false,"error":
// slackErr}, as Slack does for a channel it does not know or the app is
// not in; "" makes the channel answer again.
func (f *Server) FailChannel(channel, slackErr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if slackErr == "" {
		delete(f.channels, channel)
		return
	}
	f.channels[channel] = slackErr
}

// History returns the messages in channel, newest first.
func (f *Server) History(channel string) []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.history[channel]...)
}

// Calls returns every call so far.
func (f *Server) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// CallsOf returns the calls of method to channel ("" for any channel),
// answered or refused.
func (f *Server) CallsOf(method, channel string) []Call {
	var out []Call
	for _, c := range f.Calls() {
		if c.Method == method && (channel == "" || c.Channel == channel) {
			out = append(out, c)
		}
	}
	return out
}

// Last returns the latest call of method, answered or refused; a zero
// Call when there was none.
func (f *Server) Last(method string) Call {
	calls := f.CallsOf(method, "")
	if len(calls) == 0 {
		return Call{}
	}
	return calls[len(calls)-1]
}

// Delivered returns the calls of method ("" for all) that Slack accepted.
func (f *Server) Delivered(method string) []Call {
	var out []Call
	for _, c := range f.Calls() {
		if c.Answer == "ok" && (method == "" || c.Method == method) {
			out = append(out, c)
		}
	}
	return out
}

// Messages returns the accepted chat.postMessage and chat.update calls:
// what the channels show, in order.
func (f *Server) Messages() []Call {
	var out []Call
	for _, c := range f.Delivered("") {
		if c.Method == "chat.postMessage" || c.Method == "chat.update" {
			out = append(out, c)
		}
	}
	return out
}

// form reads a Web API call's arguments: slack-go sends a form, n8n's
// Slack node and HTTP templates send JSON.
func form(r *http.Request, raw []byte) url.Values {
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		vals, _ := url.ParseQuery(string(raw))
		return vals
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	vals := url.Values{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			vals.Set(k, s)
		} else {
			b, _ := json.Marshal(v)
			vals.Set(k, string(b))
		}
	}
	return vals
}

func (f *Server) handle(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	vals := form(r, raw)
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	// Slack takes the token from the form too; Slack's advice is the
	// header, so that is what the fake checks.
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")

	f.mu.Lock()
	mode := f.mode
	if len(f.script) > 0 {
		mode, f.script = f.script[0], f.script[1:]
	}
	if bad := f.channels[vals.Get("channel")]; bad != "" && mode == "ok" {
		mode = bad
	}
	if token != Token {
		mode = "invalid_auth"
	}
	call := Call{Method: method, Channel: vals.Get("channel"), TS: vals.Get("ts"), Text: vals.Get("text"),
		Blocks: readable(vals.Get("blocks")), Attachments: vals.Get("attachments"), Raw: string(raw), Answer: mode}
	if method == "chat.postMessage" && (mode == "ok" || mode == "slow" || mode == "timeout") {
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
	case "ok":
	case "429":
		w.Header().Set("Retry-After", fmt.Sprint(retry))
		Answer(w, http.StatusTooManyRequests, map[string]any{"ok": false, "error": "ratelimited"})
		return
	case "5xx":
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "<html><body>Service Unavailable</body></html>")
		return
	case "slow":
		select {
		case <-time.After(slow):
		case <-r.Context().Done():
			return
		}
	case "timeout":
		<-r.Context().Done()
		return
	default:
		Answer(w, http.StatusOK, map[string]any{"ok": false, "error": mode})
		return
	}
	switch method {
	case "users.lookupByEmail":
		if userID == "" {
			Answer(w, http.StatusOK, map[string]any{"ok": false, "error": "users_not_found"})
			return
		}
		Answer(w, http.StatusOK, map[string]any{"ok": true, "user": map[string]any{"id": userID, "name": "x"}})
	case "chat.postMessage", "chat.update":
		Answer(w, http.StatusOK, map[string]any{"ok": true, "channel": call.Channel, "ts": call.TS})
	case "chat.postEphemeral":
		Answer(w, http.StatusOK, map[string]any{"ok": true, "message_ts": "1700000001.000001"})
	case "views.open":
		if vals.Get("trigger_id") == "" {
			Answer(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_trigger_id"})
			return
		}
		Answer(w, http.StatusOK, map[string]any{"ok": true, "view": map[string]any{"id": "V0REASON", "type": "modal"}})
	case "conversations.history":
		if vals.Get("include_all_metadata") != "1" {
			for i, m := range history { // Slack leaves metadata out unless asked
				c := maps.Clone(m)
				delete(c, "metadata")
				history[i] = c
			}
		}
		Answer(w, http.StatusOK, map[string]any{"ok": true, "messages": history, "has_more": false})
	case "usergroups.users.list":
		if members == nil {
			Answer(w, http.StatusOK, map[string]any{"ok": false, "error": "no_such_subteam"})
			return
		}
		Answer(w, http.StatusOK, map[string]any{"ok": true, "users": members})
	default:
		Answer(w, http.StatusOK, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// Shown returns the texts of the blocks as a person reads them (Slack
// turns &lt; &gt; &amp; back into < > &).
func (c Call) Shown() string {
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

// Content is everything the call carries for a reader, as sent: the text,
// the blocks and the attachments.
func (c Call) Content() string { return c.Text + "\n" + c.Blocks + "\n" + c.Attachments }

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

// Answer writes v as Slack's JSON answer with status.
func Answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
