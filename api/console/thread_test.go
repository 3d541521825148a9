package console_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/net/html"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	"github.com/n8n-guard/n8n-guard/notify/decision"
	slackapi "github.com/n8n-guard/n8n-guard/slack"
)

// threadSlack is Slack's Web API as notify calls it, recording each call:
// a channel it does not know (refused) answers channel_not_found, as
// Slack does; the rest is accepted.
type threadSlack struct {
	url     string
	mu      sync.Mutex
	refused map[string]bool
	calls   []threadCall
	ts      int
}

type threadCall struct{ Method, Channel, Text, Blocks string }

func newThreadSlack(t *testing.T, refused ...string) *threadSlack {
	f := &threadSlack{refused: map[string]bool{}}
	for _, c := range refused {
		f.refused[c] = true
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(f.handle)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.url = "http://" + ln.Addr().String() + "/api/"
	return f
}

func (f *threadSlack) handle(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	ch := r.FormValue("channel")
	f.mu.Lock()
	f.calls = append(f.calls, threadCall{Method: method, Channel: ch, Text: r.FormValue("text"), Blocks: r.FormValue("blocks")})
	f.ts++
	ts := fmt.Sprintf("1733100000.%06d", f.ts)
	refused := f.refused[ch]
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case refused:
		fmt.Fprint(w, `{"ok":false,"error":"channel_not_found"}`)
	case method == "chat.update":
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, ch, r.FormValue("ts"))
	default:
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, ch, ts)
	}
}

func (f *threadSlack) Calls(method string) []threadCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []threadCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// threadSite is a console with notifications: a real bbolt file shared
// by the keystore and the outbox, the notify worker running, the console
// on loopback.
type threadSite struct {
	*site
	store  *bolt.Store
	outbox notify.Outbox
	notes  consoleThread
	stop   func() // stops the worker
}

// consoleThread is the console's Thread as the guard wires it: the
// notification service and the decisions on its messages.
type consoleThread struct {
	*notify.Service
	*decision.Decider
}

// decisionsOn builds the decisions on notes' messages, as a guard start
// does.
func decisionsOn(t testing.TB, notes *notify.Service, opts decision.Options) consoleThread {
	t.Helper()
	opts.Notes = notes
	d, err := decision.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return consoleThread{notes, d}
}

// crmConfig routes namespace crm's stuck keys to Ana in #crm-oncall.
func crmConfig(channel string) notify.Config {
	return notify.Config{
		DefaultChannel: "C0ALERTS", DefaultOwner: "U0ONCALL",
		Namespaces: map[string]notify.Route{"crm": {Owner: "U0ANA", Channel: channel, Runbook: "https://wiki.example.org/runbooks/crm"}},
		Owners:     []notify.OwnerRule{{Workflow: "orders-*", Owner: "U0ANA", Channel: channel}},
	}
}

func newThreadSite(t *testing.T, slack *threadSlack, cfg notify.Config, ccfg console.Config) *threadSite {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	outbox, err := notifybolt.New(store.DB)
	if err != nil {
		t.Fatal(err)
	}
	ts := &threadSite{store: store, outbox: outbox}
	ts.start(t, slack, cfg)
	ts.site = ts.console(t, ccfg)
	return ts
}

// start runs a notify service on the outbox, as a guard start does with
// the configuration of the day.
func (ts *threadSite) start(t *testing.T, slack *threadSlack, cfg notify.Config) {
	t.Helper()
	client := slackapi.New(slackapi.Options{Token: "xoxb-test", APIURL: slack.url})
	notes, err := notify.New(cfg, notify.Options{Outbox: ts.outbox, PollInterval: 10 * time.Millisecond,
		Events: ts.store, Keys: ts.store, Slack: client})
	if err != nil {
		t.Fatal(err)
	}
	thread := decisionsOn(t, notes, decision.Options{Outbox: ts.outbox, Keys: ts.store, Slack: client})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { notes.Run(ctx); close(done) }()
	ts.notes = thread
	ts.stop = sync.OnceFunc(func() { cancel(); <-done; thread.Decider.Close() })
	t.Cleanup(ts.stop)
}

// console serves a console on the store and the running service.
func (ts *threadSite) console(t *testing.T, cfg console.Config) *site {
	t.Helper()
	cfg.Store, cfg.SignIn = ts.store, signIn
	cfg.Notifications, cfg.Resender, cfg.Thread, cfg.Parking = ts.notes, ts.notes, ts.notes, ts.store
	cfg.Hint = slackapi.HintOf
	ui, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	ui.Mount(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.ShutdownWithTimeout(5 * time.Second) })
	return &site{t: t, url: "http://" + ln.Addr().String(), store: ts.store, ctx: context.Background()}
}

// doc is a parsed page.
type doc struct{ root *html.Node }

func parsePage(t *testing.T, page string) doc {
	t.Helper()
	n, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	return doc{n}
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// find returns the first element for which match holds (nil: none).
func (d doc) find(match func(*html.Node) bool) *html.Node {
	var walk func(*html.Node) *html.Node
	walk = func(n *html.Node) *html.Node {
		if n.Type == html.ElementNode && match(n) {
			return n
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if f := walk(c); f != nil {
				return f
			}
		}
		return nil
	}
	return walk(d.root)
}

func (d doc) byID(id string) *html.Node {
	return d.find(func(n *html.Node) bool { return attr(n, "id") == id })
}

// href is the link of the element id ("" when there is none, or it is
// not a link).
func (d doc) href(id string) string {
	n := d.byID(id)
	if n == nil || n.Data != "a" {
		return ""
	}
	return attr(n, "href")
}

// linkIn is the first link inside the element id.
func (d doc) linkIn(id string) string {
	n := d.byID(id)
	if n == nil {
		return ""
	}
	if a := (doc{n}).find(func(n *html.Node) bool { return n.Data == "a" }); a != nil {
		return attr(a, "href")
	}
	return ""
}

func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// reserveUnknown puts a key into unknown as the shipped templates do: the
// holder names the workflow and the execution.
func reserveUnknown(t *testing.T, store keystore.Store, ns, key, holder, dest string) {
	t.Helper()
	ctx := context.Background()
	res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: holder, Destination: dest})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("reserve %s: %v %v", key, res.Outcome, err)
	}
	if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token,
		Reason: keystore.ReasonOutcomeUnknown, Message: "CRM timed out"}); err != nil {
		t.Fatal(err)
	}
}

// The key page of a stuck key links everything a person needs: the
// holder's execution and workflow in n8n, the owner, the runbook, the
// Slack message about the key and the destination's breaker.
func TestKeyPageLinksTheThread(t *testing.T) {
	slack := newThreadSlack(t)
	ts := newThreadSite(t, slack, crmConfig("C0CRMONCALL"),
		console.Config{N8nURL: "https://n8n.example.org/", SlackWorkspace: "acme"})
	reserveUnknown(t, ts.store, "crm", "lead-1", "n8n LeadCrm00000001 exec 48016", "hubspot")
	testwait.For(t, "the message about lead-1 is in Slack", func() bool {
		r, err := ts.notes.AboutKey(context.Background(), "crm", "lead-1")
		return err == nil && r != nil && r.SlackTS != ""
	})
	posted := slack.Calls("chat.postMessage")
	if len(posted) != 1 || posted[0].Channel != "C0CRMONCALL" {
		t.Fatalf("posted: %+v", posted)
	}
	c, _ := signedIn(t, ts.site, actToken)
	_, page := fetch(t, c, ts.url+"/ui/key?namespace=crm&key=lead-1")
	d := parsePage(t, page)
	msg, _ := ts.notes.AboutKey(context.Background(), "crm", "lead-1")
	for _, tc := range []struct{ what, got, want string }{
		{"the execution in n8n", d.href("holder-execution"), "https://n8n.example.org/workflow/LeadCrm00000001/executions/48016"},
		{"the workflow in n8n", d.href("holder-workflow"), "https://n8n.example.org/workflow/LeadCrm00000001"},
		{"the owner", d.linkIn("owner"), "https://acme.slack.com/team/U0ANA"},
		{"the runbook", d.linkIn("runbook"), "https://wiki.example.org/runbooks/crm"},
		{"the Slack message", d.linkIn("slack"), "https://acme.slack.com/archives/C0CRMONCALL/p" + strings.ReplaceAll(msg.SlackTS, ".", "")},
		{"the breaker", d.href("breaker"), "/ui/destination?name=hubspot"},
		{"the breaker beside the destination", d.href("breaker-link"), "/ui/destination?name=hubspot"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: link %q, want %q", tc.what, tc.got, tc.want)
		}
	}
	if got := textOf(d.byID("holder")); got != "n8n execution 48016 of workflow LeadCrm00000001" {
		t.Errorf("the holder reads %q", got)
	}
	if got := textOf(d.byID("owner")); got != "U0ANA in C0CRMONCALL" {
		t.Errorf("the owner reads %q", got)
	}

	// The community node's holder names no workflow: n8n has no page for
	// an execution without it, so the link opens the executions list.
	reserveUnknown(t, ts.store, "crm", "lead-2", "n8n execution 77", "")
	_, page = fetch(t, c, ts.url+"/ui/key?namespace=crm&key=lead-2")
	d = parsePage(t, page)
	if d.href("holder-execution") != "" || d.href("holder-executions") != "https://n8n.example.org/home/executions" {
		t.Errorf("a holder without workflow: execution %q, list %q", d.href("holder-execution"), d.href("holder-executions"))
	}
	if d.byID("breaker") != nil {
		t.Error("a key without destination links a breaker")
	}

	// A holder in its own words is shown as it is, without links.
	reserveUnknown(t, ts.store, "crm", "lead-3", "Bob's <import> script", "")
	_, page = fetch(t, c, ts.url+"/ui/key?namespace=crm&key=lead-3")
	d = parsePage(t, page)
	if got := textOf(d.byID("holder")); got != "Bob's <import> script" || d.linkIn("holder") != "" {
		t.Errorf("a free-text holder reads %q, link %q", got, d.linkIn("holder"))
	}

	// Without the workspace, Slack's redirect opens the message's channel;
	// the owner is text.
	plain := ts.console(t, console.Config{N8nURL: "https://n8n.example.org"})
	c2, _ := signedIn(t, plain, actToken)
	_, page = fetch(t, c2, plain.url+"/ui/key?namespace=crm&key=lead-1")
	d = parsePage(t, page)
	if got := d.linkIn("slack"); got != "https://slack.com/app_redirect?channel=C0CRMONCALL" {
		t.Errorf("without the workspace, the Slack link is %q", got)
	}
	if got := d.linkIn("owner"); got != "" {
		t.Errorf("without the workspace, the owner links %q", got)
	}
}

func TestParseHolder(t *testing.T) {
	for in, want := range map[string][2]string{
		"n8n LeadCrm00000001 exec 48016": {"LeadCrm00000001", "48016"},
		"n8n execution 48016":            {"", "48016"},
		"N8N exec 5":                     {"", "5"},
		"  n8n wf-1 exec 9 ":             {"wf-1", "9"},
		"n8n LeadCrm exec":               {"", ""},
		"n8n exec 48016 and more":        {"", ""},
		"console: on-call":               {"", ""},
		"":                               {"", ""},
	} {
		h := console.ParseHolder(in)
		if h.WorkflowID != want[0] || h.ExecutionID != want[1] || h.Text != in {
			t.Errorf("%q: workflow %q execution %q", in, h.WorkflowID, h.ExecutionID)
		}
	}
}

// With n8n's API, the holder's workflow is named, its id beside; a
// workflow n8n does not know (deleted) keeps its id, and n8n is asked
// once for it.
func TestKeyPageNamesTheWorkflow(t *testing.T) {
	slack := newThreadSlack(t)
	asked := map[string]int{}
	var mu sync.Mutex
	ts := newThreadSite(t, slack, crmConfig("C0CRMONCALL"), console.Config{N8nURL: "https://n8n.example.org",
		WorkflowName: func(_ context.Context, id string) (string, error) {
			mu.Lock()
			asked[id]++
			mu.Unlock()
			if id == "LeadCrm00000001" {
				return "Lead to CRM", nil
			}
			return "", fmt.Errorf("n8n GET /workflows/%s: HTTP 404 Not Found", id)
		}})
	reserveUnknown(t, ts.store, "crm", "lead-1", "n8n LeadCrm00000001 exec 48016", "")
	reserveUnknown(t, ts.store, "crm", "lead-2", "n8n Gone0000000001 exec 5", "")
	c, _ := signedIn(t, ts.site, actToken)
	_, page := fetch(t, c, ts.url+"/ui/key?namespace=crm&key=lead-1")
	d := parsePage(t, page)
	if got := textOf(d.byID("holder")); got != "n8n execution 48016 of workflow Lead to CRM (LeadCrm00000001)" {
		t.Errorf("the holder reads %q", got)
	}
	if textOf(d.byID("holder-workflow")) != "Lead to CRM" {
		t.Errorf("the workflow link reads %q", textOf(d.byID("holder-workflow")))
	}
	for range 2 {
		_, page = fetch(t, c, ts.url+"/ui/key?namespace=crm&key=lead-2")
	}
	if got := textOf(parsePage(t, page).byID("holder")); got != "n8n execution 5 of workflow Gone0000000001" {
		t.Errorf("a workflow n8n does not know reads %q", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked["Gone0000000001"] != 1 {
		t.Errorf("n8n was asked %d times for the missing workflow", asked["Gone0000000001"])
	}
}
