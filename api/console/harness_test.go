package console_test

import (
	"context"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Two tokens: one whose role may act, one that may only read.
const (
	actToken  = "act-token-0123456789"
	readToken = "read-token-0123456789"
	// limitedToken may act, within namespaces bookings and hubspot.
	limitedToken = "limited-token-0123456789"
	// namedToken is a token of one person (tokens.<name>.person).
	namedToken = "named-token-0123456789"
	// personToken is ops-ana, a token that names its person.
	personToken = "person-token-0123456789"
)

// site is one test's console: a real bbolt file, the console mounted on a
// fiber app, real HTTP on loopback.
type site struct {
	t     *testing.T
	url   string
	store keystore.Store
	ctx   context.Context
}

// parkingDestinations configures the destinations the tests park keys of
// as the shipped workflows' operator does: their own namespaces report
// them, so one refused connection opens the breaker (parkedKey).
func parkingDestinations(p keystore.Policies, dests ...string) keystore.Policies {
	if p.Destinations == nil {
		p.Destinations = map[string]keystore.DestinationPolicy{}
	}
	for _, d := range dests {
		dp := p.Destinations[d]
		dp.UnreachableThreshold = 1
		p.Destinations[d] = dp
	}
	return p
}

// siteOn serves a console on a new bbolt store with pol for the test's
// life; the store is returned for what the test does behind the console.
func siteOn(t *testing.T, pol keystore.Policies) (*site, *bolt.Store) {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s, stop, err := serve(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	return s, store
}

func newSite(t *testing.T) *site {
	return newRefreshingSite(t, -1)
}

// newRefreshingSite is a site whose lists refresh themselves every
// (console.Config.Refresh). Every other site's pages never do: a refresh
// replaces the elements a browser test has found ("No node with given id
// found"), so those tests wait for what the page shows, not for a clock.
func newRefreshingSite(t *testing.T, every time.Duration) *site {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: parkingDestinations(keystore.Policies{}, "hubspot", "salesforce")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s, stop, err := serveEvery(store, every)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	return s
}

// serve mounts a console on store (and notes, when given) and serves it
// on loopback until stop; its pages do not refresh themselves.
func serve(store keystore.Store, notes ...*notify.Service) (s *site, stop func(), err error) {
	return serveEvery(store, -1, notes...)
}

func serveEvery(store keystore.Store, refresh time.Duration, notes ...*notify.Service) (s *site, stop func(), err error) {
	cfg := console.Config{
		Store:   store,
		SignIn:  signIn,
		Refresh: refresh,
		// Keys of namespace "late" are overdue as soon as they park.
		Policies: keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{"late": {ParkedLimit: time.Nanosecond}}},
	}
	if ps, ok := store.(console.Parking); ok {
		cfg.Parking = ps
	}
	if len(notes) > 0 {
		cfg.Notifications, cfg.Resender = notes[0], notes[0]
	}
	return serveConfig(cfg)
}

// serveConfig serves a console of cfg on loopback until stop.
func serveConfig(cfg console.Config) (s *site, stop func(), err error) {
	ui, err := console.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	ui.Mount(app)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	go app.Listener(ln)
	stop = func() { app.ShutdownWithTimeout(5 * time.Second) }
	return &site{url: "http://" + ln.Addr().String(), store: cfg.Store, ctx: context.Background()}, stop, nil
}

// signIn is the roles table of the tests; api's, from the scoped tokens,
// is the real one (api/console_test.go).
func signIn(token string) (access.Principal, error) {
	switch token {
	case actToken:
		return access.Principal{Name: "on-call", Role: access.RoleAdmin}, nil
	case readToken:
		return access.Principal{Name: "viewer", Role: access.RoleRead}, nil
	case namedToken:
		return access.Principal{Name: "ana-laptop", Role: access.RoleAdmin, PersonName: "ana@example.com"}, nil
	case personToken:
		return access.Principal{Name: "ops-ana", Role: access.RoleAdmin, PersonName: "ana@example.com"}, nil
	case limitedToken:
		return access.Principal{Name: "bookings-admin", Role: access.RoleAdmin, Namespaces: []string{"bookings", "hubspot"}}, nil
	}
	return access.Principal{}, errs.Errorf(problem.Unauthorized, "that token is not valid")
}

// unknownKey puts a key into unknown the way n8n does: reserve, then a
// timeout reported as outcome_unknown.
func (s *site) unknownKey(ns, key, owner, message string) {
	s.t.Helper()
	res, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: owner})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		s.t.Fatalf("reserve %s: %v %v", key, res.Outcome, err)
	}
	if _, err := s.store.Fail(s.ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token,
		Reason: keystore.ReasonOutcomeUnknown, Message: message}); err != nil {
		s.t.Fatal(err)
	}
}

// parkedKey parks a key of dest the way the shipped workflows do: dest's
// breaker is opened by an unreachable write (once), then a reserve with
// the execution's resume URL parks.
func (s *site) parkedKey(ns, key, dest, resumeURL string) *keystore.Record {
	s.t.Helper()
	res, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: dest, ResumeURL: resumeURL, Owner: "n8n exec 1"})
	if err == nil && res.Outcome == keystore.OutcomeAccepted {
		if _, err := s.store.Fail(s.ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token,
			Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeURL}); err != nil {
			s.t.Fatal(err)
		}
		return s.lookup(ns, key)
	}
	if err != nil || res.Outcome != keystore.OutcomeParked {
		s.t.Fatalf("park %s: %v %v", key, res.Outcome, err)
	}
	return res.Record
}

// lostKey parks a key and has n8n answer its resume call 404 (the
// execution was pruned).
func (s *site) lostKey(ns, key, dest, resumeURL string) {
	s.t.Helper()
	r := s.parkedKey(ns, key, dest, resumeURL)
	if _, err := s.store.(keystore.ParkStore).ResumeAnswered(s.ctx, ns, key, *r.ParkedAt, keystore.ResumeLost, "n8n answered 404: the execution does not exist"); err != nil {
		s.t.Fatal(err)
	}
}

func (s *site) breaker(dest string) keystore.Breaker {
	s.t.Helper()
	bs, err := s.store.Destinations(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, b := range bs {
		if b.Destination == dest {
			return b
		}
	}
	return keystore.Breaker{Destination: dest, State: keystore.BreakerClosed}
}

func (s *site) completedKey(ns, key string) {
	s.t.Helper()
	res, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: "n8n exec 1"})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.store.Complete(s.ctx, keystore.CompleteRequest{Namespace: ns, Key: key, Token: res.Token}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *site) lookup(ns, key string) *keystore.Record {
	s.t.Helper()
	res, err := s.store.Lookup(s.ctx, ns, key)
	if err != nil || res.Record == nil {
		s.t.Fatalf("lookup %s/%s: %v", ns, key, err)
	}
	return res.Record
}

// client is a cookie-keeping HTTP client that does not follow redirects,
// so tests see the 303s.
func client(t testing.TB) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func postForm(t testing.TB, c *http.Client, u string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
