package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/notify"
	notifybolt "github.com/n8n-guard/n8n-guard/notify/bolt"
	"github.com/n8n-guard/n8n-guard/notify/decision"
	"github.com/n8n-guard/n8n-guard/slack"
)

const testToken = "test-token-0123456789"

// seen collects every answer the suite received over HTTP, so TestMain can
// check them all at the end (no top-level "error" key; each matches the
// OpenAPI document).
var seen recorder

type recorder struct {
	mu    sync.Mutex
	resps []*resp
}

func (r *recorder) add(x *resp) {
	r.mu.Lock()
	r.resps = append(r.resps, x)
	r.mu.Unlock()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := checkAllResponses(seen.resps); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: responses of the suite:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// checkAllResponses walks every response of the suite.
func checkAllResponses(resps []*resp) error {
	if len(resps) == 0 {
		return nil // a filtered run (-run) that made no call
	}
	spec, err := loadSpec()
	if err != nil {
		return err
	}
	var errs []string
	statuses := map[int]int{}
	for _, r := range resps {
		statuses[r.Status]++
		if err := checkResponse(spec, r); err != nil {
			errs = append(errs, fmt.Sprintf("%s %s -> %d: %v\n  body: %.300s", r.Method, r.Path, r.Status, err, r.Body))
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return fmt.Errorf("%d of %d responses are wrong:\n%s", len(errs), len(resps), strings.Join(errs, "\n"))
	}
	fmt.Fprintf(os.Stderr, "checked %d responses (statuses %v): no top-level error key, all match docs/openapi.yaml\n", len(resps), statuses)
	return nil
}

func checkResponse(spec *specDoc, r *resp) error {
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/json") || strings.HasPrefix(ct, problem.ContentType) {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(r.Body, &top); err != nil {
			return fmt.Errorf("body is not a JSON object: %v", err)
		}
		if _, ok := top["error"]; ok {
			return fmt.Errorf(`top-level "error" key: n8n's Retry On Fail would repeat the request`)
		}
	}
	if r.Status >= 400 && ct != problem.ContentType {
		return fmt.Errorf("error answer with content type %q, want %s", ct, problem.ContentType)
	}
	return spec.validate(r)
}

// env is one test's server: a real bbolt file, the real notify outbox (no
// Slack: its worker is not started), real HTTP on loopback.
type env struct {
	url    string
	clock  *fakeclock.Clock
	store  *bolt.Store
	srv    *api.Server
	client *http.Client
	// unrecorded: answers are not kept for TestMain (the fuzz target checks
	// its own, and keeping millions would not fit in memory).
	unrecorded bool
}

type envOption func(*envConfig)

type envConfig struct {
	policies  keystore.Policies
	bodyLimit int
	api       api.Config // the scope, cap, label and re-run fields only
	noBackup  bool       // serve as a store without Backup does (PostgreSQL)
	noN8n     bool       // no n8n configured for resume calls
}

// withoutN8n serves without an n8n instance for resume calls: parking off.
func withoutN8n() envOption { return func(c *envConfig) { c.noN8n = true } }

func withPolicies(p keystore.Policies) envOption {
	return func(c *envConfig) { c.policies = p }
}

func withBodyLimit(n int) envOption { return func(c *envConfig) { c.bodyLimit = n } }

// withoutBackup wires the server as for a PostgreSQL store: no Backup.
func withoutBackup() envOption { return func(c *envConfig) { c.noBackup = true } }

// withAPI sets the server's scoped tokens, connection cap, read timeout
// and metric label bounds from cfg.
func withAPI(cfg api.Config) envOption { return func(c *envConfig) { c.api = cfg } }

func start(t testing.TB, opts ...envOption) *env {
	t.Helper()
	var cfg envConfig
	for _, o := range opts {
		o(&cfg)
	}
	clock := fakeclock.New()
	if !cfg.policies.Resume.Configured() && !cfg.noN8n { // the n8n instances the tests' resume URLs name
		cfg.policies.Resume = testResumeTargets(t)
	}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "n8n-guard.db"), bolt.Options{
		Policies: cfg.policies, Clock: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	outbox, err := notifybolt.New(store.DB)
	if err != nil {
		t.Fatal(err)
	}
	notes, err := notify.New(notify.Config{DefaultChannel: "C0ALERTS", DefaultOwner: "U0ONCALL"},
		notify.Options{Outbox: outbox, Clock: clock.Now, Events: store})
	if err != nil {
		t.Fatal(err)
	}
	decisions, err := decision.New(decision.Options{Notes: notes, Outbox: outbox, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var backup api.Backuper = store
	if cfg.noBackup {
		backup = nil
	}
	limits := cfg.api.Limits
	limits.BodyLimit = cfg.bodyLimit
	wired := interactions{notes, decisions, slack.NewInteractions("", decisions, nil)}
	srv, err := api.New(api.Config{
		Store: store, Notifications: wired, Interactions: wired, Backup: backup, Fault: store.Fault,
		Tokens:   []string{testToken, "second-token"},
		Registry: reg, Limits: limits, Version: "test", Policies: cfg.policies,
		ScopedTokens: cfg.api.ScopedTokens,
		Namespaces:   cfg.api.Namespaces, Destinations: cfg.api.Destinations, LabelLimit: cfg.api.LabelLimit,
		Logger: cfg.api.Logger, Reruns: cfg.api.Reruns, Clock: cfg.api.Clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	e := &env{
		url: "http://" + ln.Addr().String(), clock: clock, store: store, srv: srv,
		client: &http.Client{Timeout: 10 * time.Second},
	}
	t.Cleanup(func() {
		// Connections the client dialled but never used count as busy for
		// fasthttp's first 5 s (as in net/http); closing them keeps the
		// suite fast. Shutdown itself closes idle keep-alive connections.
		e.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-served
		store.Close()
	})
	return e
}

// resp is one answer, as received.
type resp struct {
	Method, Path string
	Status       int
	Header       http.Header
	Body         []byte
}

// JSON decodes the body as an object.
func (r *resp) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v\n%s", r.Method, r.Path, err, r.Body)
	}
	return m
}

func (r *resp) String() string {
	return fmt.Sprintf("%s %s -> %d %s", r.Method, r.Path, r.Status, r.Body)
}

// call sends body (a string or []byte as is, anything else as JSON) with
// the test token.
func (e *env) call(t testing.TB, method, path string, body any) *resp {
	t.Helper()
	return e.callWith(t, method, path, body, map[string]string{"Authorization": "Bearer " + testToken})
}

func (e *env) callWith(t testing.TB, method, path string, body any, headers map[string]string) *resp {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	var rd io.Reader
	if raw != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := &resp{Method: method, Path: path, Status: res.StatusCode, Header: res.Header, Body: b}
	if !e.unrecorded {
		seen.add(r)
	}
	return r
}

func (e *env) post(t testing.TB, path string, body any) *resp {
	t.Helper()
	return e.call(t, http.MethodPost, path, body)
}

func (e *env) get(t testing.TB, path string) *resp {
	t.Helper()
	return e.call(t, http.MethodGet, path, nil)
}

type obj = map[string]any

const ns = "crm-contacts"

// reserve reserves key in ns and returns the answer's fields.
func (e *env) reserve(t testing.TB, key string, extra ...obj) map[string]any {
	t.Helper()
	body := obj{"namespace": ns, "key": key, "owner": "n8n exec 4711"}
	for _, x := range extra {
		for k, v := range x {
			body[k] = v
		}
	}
	r := e.post(t, "/v1/reserve", body)
	if r.Status != http.StatusOK {
		t.Fatalf("reserve: %s", r)
	}
	return r.JSON(t)
}

// accepted reserves a new key and returns its token.
func (e *env) accepted(t testing.TB, key string, extra ...obj) string {
	t.Helper()
	a := e.reserve(t, key, extra...)
	if a["outcome"] != "accepted" {
		t.Fatalf("reserve %s: outcome %v, want accepted", key, a["outcome"])
	}
	return a["token"].(string)
}

// wantOK checks a 200 answer with the given outcome and returns its fields.
func wantOK(t testing.TB, r *resp, outcome string) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("want 200 %s, got %s", outcome, r)
	}
	m := r.JSON(t)
	if m["outcome"] != outcome {
		t.Fatalf("outcome = %v, want %s: %s", m["outcome"], outcome, r.Body)
	}
	return m
}

// wantProblem checks an error answer and returns the problem.
func wantProblem(t testing.TB, r *resp, status int, code string) problem.Problem {
	t.Helper()
	if r.Status != status {
		t.Fatalf("want %d %s, got %s", status, code, r)
	}
	if ct := r.Header.Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("content type %q, want %s", ct, problem.ContentType)
	}
	var p problem.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	if string(p.Code) != code || p.Status != status || p.Title == "" || p.Detail == "" || !strings.HasSuffix(p.Type, "#"+code) {
		t.Fatalf("problem = %+v, want code %s status %d", p, code, status)
	}
	return p
}

// interactions is what serve wires for the notifications: the service,
// the decisions on its messages (the console's on failures), and the
// slack adapter's signed clicks (refused here: no signing secret).
type interactions struct {
	*notify.Service
	*decision.Decider
	*slack.Interactions
}

// testResumeTargets are the n8n instances the tests' resume URLs point at.
func testResumeTargets(t testing.TB) keystore.ResumeTargets {
	t.Helper()
	tg, err := keystore.NewResumeTargets([]string{"http://n8n.local:5678", "http://n8n.local", "http://n8n"}, "")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}
