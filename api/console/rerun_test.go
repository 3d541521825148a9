package console_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// kicks stands in for the re-run worker (rerun.Runner): it counts the
// kicks a grant gives it.
type kicks struct{ n atomic.Int32 }

func (k *kicks) Kick() { k.n.Add(1) }

// rerunSite serves a console that can re-run n8n executions when kick is
// given, and one without n8n's API when it is nil.
func rerunSite(t *testing.T, kick *kicks) *site {
	t.Helper()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cfg := console.Config{Store: store, SignIn: signIn, Refresh: -1, N8nURL: "http://n8n.local"}
	if kick != nil { // a nil *kicks would be a worker that is there
		cfg.Reruns = kick
	}
	s, stop, err := serveConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	return s
}

// gatedKey makes a key whose execution (owner) waits at its re-run gate:
// the write failed, and the gate's reserve was refused.
func (s *site) gatedKey(ns, key, owner string) {
	s.t.Helper()
	s.failedKey(ns, key, owner)
	res, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: owner, Rerun: true})
	if err != nil || res.Outcome != keystore.OutcomeRerunNotGranted {
		s.t.Fatalf("the gate of %s: %v %v", key, res.Outcome, err)
	}
}

// failedKey makes a failed, retryable key whose execution stopped at no
// gate.
func (s *site) failedKey(ns, key, owner string) {
	s.t.Helper()
	res, err := s.store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: owner})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		s.t.Fatalf("reserve %s: %v %v", key, res.Outcome, err)
	}
	if _, err := s.store.Fail(s.ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token,
		Reason: keystore.ReasonDestinationFailed, Message: "HTTP 422"}); err != nil {
		s.t.Fatal(err)
	}
}

func lastEvent(r *keystore.Record) keystore.HistoryEvent { return r.History[len(r.History)-1].Event }

func TestKeyPageRerunsTheExecutionAtTheGate(t *testing.T) {
	kick := &kicks{}
	s := rerunSite(t, kick)
	s.gatedKey("crm", "lead-1", "n8n wf1 exec 42")
	c, csrf := signedIn(t, s, actToken)
	page := keyPage(t, c, s, "crm", "lead-1")
	d := parsePage(t, page)
	if d.byID("rerun-choice") == nil || !strings.Contains(page, `href="http://n8n.local/workflow/wf1/executions/42"`) {
		t.Fatalf("the key at its gate offers no re-run of execution 42:\n%s", page)
	}
	if got := textOf(d.byID("rerun-help")); !strings.Contains(got, "asks n8n to retry that execution") || !strings.Contains(got, "at most once") ||
		!strings.Contains(got, "Other events of the same execution waiting at the same gate are re-run with it") {
		t.Errorf("the re-run's help says %q", got)
	}
	if got := textOf(d.byID("retry-help")); !strings.Contains(got, "or when a person retries execution 42 in n8n (its re-run gate lets it through after this decision, not before)") {
		t.Errorf("the retry's help does not say when a person's retry passes the gate: %q", got)
	}
	if got := textOf(d.byID("history")); !strings.Contains(got, "stopped at its re-run gate") {
		t.Errorf("the history does not say the execution stopped at its gate: %q", got)
	}

	form := url.Values{"csrf": {csrf}, "namespace": {"crm"}, "key": {"lead-1"}, "action": {"rerun"}, "note": {"CRM back"}}
	status, _, loc := post(t, c, s.url+"/ui/key/resolve", form)
	if status != http.StatusSeeOther || !strings.Contains(loc, "done=rerun") {
		t.Fatalf("re-run: %d %s", status, loc)
	}
	r := s.lookup("crm", "lead-1")
	if lastEvent(r) != keystore.HistoryRerunGranted || r.History[len(r.History)-1].By != "console: on-call" {
		t.Fatalf("no grant in the history: %+v", r.History[len(r.History)-1])
	}
	if kick.n.Load() != 1 {
		t.Fatalf("the worker was kicked %d times, want 1", kick.n.Load())
	}
	_, page = fetch(t, c, s.url+loc)
	d = parsePage(t, page)
	if got := textOf(d.byID("rerun-status")); !strings.Contains(got, "Re-run allowed by console: on-call, waiting for n8n") {
		t.Errorf("after the grant the page says %q", got)
	}
	if d.byID("rerun-choice") != nil {
		t.Error("a granted re-run is offered again")
	}

	// The same form again (a double click): nothing changes, no second kick.
	before := len(r.History)
	if status, _, _ := post(t, c, s.url+"/ui/key/resolve", form); status != http.StatusSeeOther {
		t.Fatalf("second re-run: %d", status)
	}
	if r := s.lookup("crm", "lead-1"); len(r.History) != before || kick.n.Load() != 1 {
		t.Fatalf("a second submit changed the key (history %d → %d) or kicked again (%d)", before, len(r.History), kick.n.Load())
	}

	// A guard claimed it, and n8n started it.
	if _, ok, err := s.store.ClaimRerunHeld(s.ctx, "crm", "lead-1", "n8n-guard", time.Minute, time.Minute); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if ok, err := s.store.NoteRerun(s.ctx, "crm", "lead-1", keystore.HistoryRerunStarted, "57"); err != nil || !ok {
		t.Fatalf("note: %v %v", ok, err)
	}
	page = keyPage(t, c, s, "crm", "lead-1")
	d = parsePage(t, page)
	if got := textOf(d.byID("rerun-status")); !strings.Contains(got, "Re-run started as execution 57") ||
		!strings.Contains(page, `href="http://n8n.local/workflow/wf1/executions/57"`) {
		t.Errorf("after n8n started it the page says %q", got)
	}
	if got := textOf(d.byID("history")); !strings.Contains(got, "re-run started in n8n as execution 57") || !strings.Contains(got, "re-run allowed") {
		t.Errorf("the history does not name the re-run in words: %q", got)
	}
}

func TestKeyPageOffersTheRerunAgainAfterN8nRefusedIt(t *testing.T) {
	kick := &kicks{}
	s := rerunSite(t, kick)
	s.gatedKey("crm", "lead-1", "n8n wf1 exec 42")
	c, csrf := signedIn(t, s, actToken)
	form := url.Values{"csrf": {csrf}, "namespace": {"crm"}, "key": {"lead-1"}, "action": {"rerun"}, "note": {"CRM back"}}
	if status, _, _ := post(t, c, s.url+"/ui/key/resolve", form); status != http.StatusSeeOther {
		t.Fatalf("re-run: %d", status)
	}
	if _, err := s.store.NoteRerun(s.ctx, "crm", "lead-1", keystore.HistoryRerunRefused, "n8n refused the re-run: execution 42 was deleted"); err != nil {
		t.Fatal(err)
	}
	d := parsePage(t, keyPage(t, c, s, "crm", "lead-1"))
	if got := textOf(d.byID("rerun-status")); !strings.Contains(got, "execution 42 was deleted") {
		t.Errorf("n8n's refusal is not shown: %q", got)
	}
	if d.byID("rerun-choice") == nil {
		t.Fatal("after n8n refused, the re-run is not offered again")
	}
	if got := textOf(d.byID("history")); !strings.Contains(got, "n8n refused the re-run") {
		t.Errorf("the history does not say n8n refused: %q", got)
	}
	if status, _, _ := post(t, c, s.url+"/ui/key/resolve", form); status != http.StatusSeeOther || kick.n.Load() != 2 {
		t.Fatalf("the second grant: %d, kicks %d", status, kick.n.Load())
	}
}

func TestRerunIsRefusedWithoutN8nAPI(t *testing.T) {
	s := rerunSite(t, nil)
	s.gatedKey("crm", "lead-1", "n8n wf1 exec 42")
	c, csrf := signedIn(t, s, actToken)
	page := keyPage(t, c, s, "crm", "lead-1")
	if d := parsePage(t, page); d.byID("rerun-choice") != nil || d.byID("retry-help") == nil {
		t.Fatalf("a guard without n8n's API offers a re-run (or no retry):\n%s", page)
	}
	before := len(s.lookup("crm", "lead-1").History)
	status, page, _ := post(t, c, s.url+"/ui/key/resolve",
		url.Values{"csrf": {csrf}, "namespace": {"crm"}, "key": {"lead-1"}, "action": {"rerun"}, "note": {"forged"}})
	if status != http.StatusNotImplemented || !strings.Contains(page, "cannot re-run n8n executions") {
		t.Fatalf("a forged re-run: %d\n%s", status, page)
	}
	if r := s.lookup("crm", "lead-1"); len(r.History) != before || lastEvent(r) != keystore.HistoryRerunGate {
		t.Fatalf("a forged re-run changed the key: %+v", r.History[len(r.History)-1])
	}
}

func TestRerunIsNotOfferedWithoutAGate(t *testing.T) {
	kick := &kicks{}
	s := rerunSite(t, kick)
	s.failedKey("crm", "lead-1", "n8n wf1 exec 42")
	c, csrf := signedIn(t, s, actToken)
	page := keyPage(t, c, s, "crm", "lead-1")
	d := parsePage(t, page)
	if d.byID("rerun-choice") != nil {
		t.Fatalf("a key whose execution waits at no gate offers a re-run:\n%s", page)
	}
	if got := textOf(d.byID("retry-help")); !strings.Contains(got, "the event is written when its sender sends it again") {
		t.Errorf("the retry's help says %q", got)
	}
	status, _, _ := post(t, c, s.url+"/ui/key/resolve",
		url.Values{"csrf": {csrf}, "namespace": {"crm"}, "key": {"lead-1"}, "action": {"rerun"}, "note": {"forged"}})
	if status != http.StatusConflict || kick.n.Load() != 0 || lastEvent(s.lookup("crm", "lead-1")) != keystore.HistoryFailed {
		t.Fatalf("a re-run of a key at no gate: %d, kicks %d", status, kick.n.Load())
	}
}

func TestBulkRerunGrantsTheGatedKeysAndSkipsTheOthers(t *testing.T) {
	kick := &kicks{}
	s := rerunSite(t, kick)
	for i, key := range []string{"lead-1", "lead-2", "lead-3"} {
		s.gatedKey("crm", key, "n8n wf1 exec 4"+string(rune('0'+i)))
	}
	s.failedKey("crm", "lead-4", "n8n wf1 exec 50")
	s.failedKey("crm", "lead-5", "n8n wf1 exec 51")
	c, csrf := signedIn(t, s, actToken)
	filter := url.Values{"namespace": {"crm"}, "state": {"failed"}}.Encode()

	_, page := fetch(t, c, s.url+"/ui/bulk?"+filter)
	if parsePage(t, page).byID("bulk-rerun-choice") == nil {
		t.Fatalf("the bulk page offers no re-run:\n%s", page)
	}
	status, page, _ := post(t, c, s.url+"/ui/bulk", url.Values{"csrf": {csrf}, "filter": {filter}, "action": {"rerun"}, "note": {"CRM back"}})
	if status != http.StatusOK || !strings.Contains(page, "Allow 3 events to be sent again and re-run their executions in n8n?") ||
		!strings.Contains(textOf(parsePage(t, page).byID("bulk-skipped")), "2: no execution waits at a re-run gate: its sender sends it again") {
		t.Fatalf("the question: %d\n%s", status, page)
	}
	confirm := confirmForm(t, page)
	status, _, loc := post(t, c, s.url+"/ui/bulk", confirm)
	if status != http.StatusSeeOther || !strings.Contains(loc, "decided=3") {
		t.Fatalf("confirm: %d %s", status, loc)
	}
	for _, key := range []string{"lead-1", "lead-2", "lead-3"} {
		if r := s.lookup("crm", key); lastEvent(r) != keystore.HistoryRerunGranted {
			t.Errorf("%s is not granted: %s", key, lastEvent(r))
		}
	}
	for _, key := range []string{"lead-4", "lead-5"} {
		if r := s.lookup("crm", key); lastEvent(r) != keystore.HistoryFailed {
			t.Errorf("%s, at no gate, was decided: %s", key, lastEvent(r))
		}
	}
	if kick.n.Load() != 1 {
		t.Fatalf("kicks %d, want 1", kick.n.Load())
	}
	_, page = fetch(t, c, s.url+loc)
	if got := textOf(parsePage(t, page).byID("bulk-done")); !strings.Contains(got, "2: no execution waits at a re-run gate") {
		t.Errorf("the result says %q", got)
	}

	// The confirmation sent twice counts 0 to decide and asks, deciding
	// nothing and kicking no more.
	if status, page, _ := post(t, c, s.url+"/ui/bulk", confirm); status != http.StatusOK || !strings.Contains(page, "The count changed from 3 to 0") || kick.n.Load() != 1 {
		t.Fatalf("a second confirmation: %d, kicks %d\n%s", status, kick.n.Load(), page)
	}
	if r := s.lookup("crm", "lead-1"); lastEvent(r) != keystore.HistoryRerunGranted || r.History[len(r.History)-2].Event != keystore.HistoryRerunGate {
		t.Fatalf("a second confirmation changed lead-1: %+v", r.History)
	}
}

func TestBulkRerunIsRefusedWithoutN8nAPI(t *testing.T) {
	s := rerunSite(t, nil)
	s.gatedKey("crm", "lead-1", "n8n wf1 exec 42")
	c, csrf := signedIn(t, s, actToken)
	filter := url.Values{"namespace": {"crm"}, "state": {"failed"}}.Encode()
	_, page := fetch(t, c, s.url+"/ui/bulk?"+filter)
	if d := parsePage(t, page); d.byID("bulk-rerun-choice") != nil || d.byID("bulk-form") == nil {
		t.Fatalf("a guard without n8n's API offers a bulk re-run (or no form):\n%s", page)
	}
	for _, confirm := range []string{"", "1"} {
		status, page, _ := post(t, c, s.url+"/ui/bulk", url.Values{"csrf": {csrf}, "filter": {filter}, "action": {"rerun"},
			"note": {"forged"}, "count": {"1"}, "confirm": {confirm}, "id": {"b-0000beef"}})
		if status != http.StatusNotImplemented || !strings.Contains(page, "cannot re-run n8n executions") {
			t.Fatalf("a forged bulk re-run (confirm %q): %d\n%s", confirm, status, page)
		}
	}
	if r := s.lookup("crm", "lead-1"); lastEvent(r) != keystore.HistoryRerunGate {
		t.Fatalf("a forged bulk re-run changed the key: %s", lastEvent(r))
	}
}

func keyPage(t *testing.T, c *http.Client, s *site, ns, key string) string {
	t.Helper()
	resp, page := fetch(t, c, s.url+"/ui/key?"+url.Values{"namespace": {ns}, "key": {key}}.Encode())
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("key page %s/%s: %d\n%s", ns, key, resp.StatusCode, page)
	}
	return page
}
