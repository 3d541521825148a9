package rerun_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// n8n is a fake n8n's retry: it answers what answer says for an
// execution and records when each retry came.
type n8n struct {
	mu     sync.Mutex
	calls  []string
	at     []time.Time
	answer func(id string) (string, error)
	called chan string
}

func newN8n(answer func(id string) (string, error)) *n8n {
	return &n8n{answer: answer, called: make(chan string, 100)}
}

func (f *n8n) Retry(ctx context.Context, workflow, id string, keys []rerun.Key, _ time.Time) (rerun.Retried, error) {
	if err := ctx.Err(); err != nil {
		return rerun.Retried{}, err // a stopped guard's ask does not reach n8n
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > 10*time.Minute {
		// n8n is asked within Started (10 min by default): its claim is
		// kept meanwhile, and a hung ask does not hold it for ever.
		return rerun.Retried{}, &rerun.Refused{Status: 400, Message: "asked without a deadline inside Started"}
	}
	if workflow != "wf1" || len(keys) == 0 {
		return rerun.Retried{}, &rerun.Refused{Status: 409, Message: fmt.Sprintf("workflow %s, keys %v", workflow, keys)}
	}
	res := rerun.Retried{Why: "execution " + id + " is not one of workflow wf1 that reserved the key"}
	for _, k := range keys {
		if strings.HasPrefix(k.Key, "forged") {
			res.NotOwn = append(res.NotOwn, k)
		}
	}
	if len(res.NotOwn) == len(keys) {
		return res, nil
	}
	f.mu.Lock()
	f.calls = append(f.calls, id)
	f.at = append(f.at, time.Now())
	f.mu.Unlock()
	defer func() { f.called <- id }()
	var err error
	res.ID, err = f.answer(id)
	return res, err
}

func (f *n8n) retries() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

type env struct {
	clock keystore.Clock
	t     *testing.T
	store *bolt.Store
	path  string
	ctx   context.Context
}

func setup(t *testing.T) *env {
	e := &env{t: t, path: filepath.Join(t.TempDir(), "guard.db"), ctx: context.Background(), clock: time.Now}
	e.open()
	return e
}

func (e *env) open() {
	s, err := bolt.Open(e.path, bolt.Options{Clock: e.clock})
	if err != nil {
		e.t.Fatal(err)
	}
	e.store = s
	e.t.Cleanup(func() { s.Close() })
}

// atGate makes key fail in execution exec and stop at its re-run gate.
func (e *env) atGate(key, exec, dest string) {
	e.t.Helper()
	owner := "n8n wf1 exec " + exec
	r, err := e.store.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Owner: owner, Destination: dest})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.store.Fail(e.ctx, keystore.FailRequest{Namespace: "crm", Key: key, Token: r.Token, Reason: keystore.ReasonDestinationFailed}); err != nil {
		e.t.Fatal(err)
	}
	if r, err := e.store.Reserve(e.ctx, keystore.ReserveRequest{Namespace: "crm", Key: key, Owner: owner, Destination: dest, Rerun: true}); err != nil || r.Outcome != keystore.OutcomeRerunNotGranted {
		e.t.Fatalf("gate of %s: %+v %v", key, r.Outcome, err)
	}
}

func (e *env) grant(key string) {
	e.t.Helper()
	if _, err := e.store.Resolve(e.ctx, keystore.ResolveRequest{Namespace: "crm", Key: key, Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM back"}); err != nil {
		e.t.Fatal(err)
	}
}

// grantInTurn grants each key on a later millisecond of the store's
// clock than the one before, so that the oldest grant goes first.
func (e *env) grantInTurn(keys ...string) {
	e.t.Helper()
	for _, k := range keys {
		e.grant(k)
		e.afterGrant(k)
	}
}

// afterGrant waits for a later millisecond than key's grant.
func (e *env) afterGrant(key string) {
	e.t.Helper()
	testwait.For(e.t, "a later millisecond than "+key+"'s grant", func() bool {
		l, err := e.store.Lookup(e.ctx, "crm", key)
		return err == nil && l.Record.ResolvedAt != nil && time.Now().Truncate(time.Millisecond).After(*l.Record.ResolvedAt)
	})
}

func (e *env) last(key string) keystore.Transition {
	e.t.Helper()
	r, err := e.store.Lookup(e.ctx, "crm", key)
	if err != nil || r.Record == nil {
		e.t.Fatalf("lookup %s: %v", key, err)
	}
	return r.Record.History[len(r.Record.History)-1]
}

func run(t *testing.T, e *env, f *n8n, opts rerun.Options) (*rerun.Runner, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	r, err := rerun.New(e.store, f, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r, reg
}

func wait(t *testing.T, f *n8n, n int) {
	t.Helper()
	for range n {
		select {
		case <-f.called:
		case <-time.After(10 * time.Second):
			t.Fatalf("n8n was asked %d times, want %d", len(f.retries()), n)
		}
	}
}

// A grant made before the runner starts (another replica, before a
// restart) is found in the store and started once; each execution once,
// a destination's re-runs at its pace, the other destination's at once.
func TestGrantsAreStartedOnceEachAtThePaceOfTheirDestination(t *testing.T) {
	e := setup(t)
	e.atGate("k1", "41", "crm")
	e.atGate("k2", "42", "crm")
	e.atGate("k3", "43", "mail")
	for _, k := range []string{"k1", "k2", "k3"} {
		e.grant(k)
	}
	e.store.Close()
	e.open() // the store is the queue: a restart loses no grant
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	const pace = 300 * time.Millisecond
	r, reg := run(t, e, f, rerun.Options{Pace: pace, Interval: time.Hour})
	wait(t, f, 3)
	got := f.retries()
	if len(got) != 3 || got[0] != "41" {
		t.Fatalf("retries %v, want 41, 42, 43 once each, the oldest grant first", got)
	}
	f.mu.Lock()
	var crmGap time.Duration
	for i, id := range f.calls {
		if id == "42" {
			crmGap = f.at[i].Sub(f.at[0])
		}
	}
	f.mu.Unlock()
	if crmGap < pace {
		t.Errorf("the second re-run to crm came %v after the first, want at least the pace %v", crmGap, pace)
	}
	testwait.For(t, "each key notes its re-run", func() bool {
		for k, id := range map[string]string{"k1": "new-41", "k2": "new-42", "k3": "new-43"} {
			if l := e.last(k); l.Event != keystore.HistoryRerunStarted || l.Detail != id {
				return false
			}
		}
		return true
	})
	// Kicked again: nothing is pending, n8n is not asked again.
	r.Kick()
	time.Sleep(100 * time.Millisecond)
	if n := len(f.retries()); n != 3 {
		t.Fatalf("n8n asked %d times after a kick with nothing pending", n)
	}
	if v := counter(t, reg, "started"); v != 3 {
		t.Fatalf("n8n_guard_reruns_total{result=started} = %v", v)
	}
}

// A re-run re-runs every item of its execution: the other keys of the
// same execution waiting at the same gate are granted with it, in the
// person's name, and n8n is asked once.
func TestTheOtherKeysOfTheExecutionAreGrantedWithIt(t *testing.T) {
	e := setup(t)
	e.atGate("a", "42", "crm")
	e.atGate("b", "42", "crm")
	e.atGate("c", "43", "crm") // another execution: not granted
	e.grant("a")
	f := newN8n(func(id string) (string, error) { return "57", nil })
	run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	wait(t, f, 1)
	testwait.For(t, "both keys of execution 42 note the re-run", func() bool {
		return e.last("a").Event == keystore.HistoryRerunStarted && e.last("b").Event == keystore.HistoryRerunStarted
	})
	rb, _ := e.store.Lookup(e.ctx, "crm", "b")
	if rb.Record.ResolvedBy != "Ana" {
		t.Fatalf("the sibling was granted by %q, want the person who allowed the re-run", rb.Record.ResolvedBy)
	}
	if l := e.last("c"); l.Event != keystore.HistoryRerunGate {
		t.Fatalf("a key of another execution: %+v", l)
	}
	if got := f.retries(); len(got) != 1 || got[0] != "42" {
		t.Fatalf("retries %v, want 42 once", got)
	}
}

// n8n's refusal is noted on the key and not asked again; n8n not
// answering ends the round (the other re-runs would wait for it too) and
// leaves the grant claimed until the claim is stale, when it is asked
// again without anybody's kick.
func TestRefusalIsNotedAndAnOutageIsTriedAgain(t *testing.T) {
	e := setup(t)
	e.atGate("gone", "41", "crm")
	e.atGate("later", "42", "mail")
	e.atGate("after", "43", "sms")
	e.grantInTurn("gone", "later", "after")
	var mu sync.Mutex
	down := true
	f := newN8n(func(id string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case id == "41":
			return "", &rerun.Refused{Status: 404, Message: `The execution with the ID "41" does not exist.`}
		case down:
			return "", fmt.Errorf("%w: dial tcp 127.0.0.1:5678: connect: %w", rerun.ErrUnreachable, errors.New("connection refused"))
		}
		return "new-" + id, nil
	})
	const claim = 300 * time.Millisecond
	_, reg := run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour, Claim: claim})
	wait(t, f, 2)
	testwait.For(t, "the refusal is noted", func() bool { return e.last("gone").Event == keystore.HistoryRerunRefused })
	if l := e.last("later"); l.Event != keystore.HistoryRerunStarting {
		t.Fatalf("n8n down: the key reads %+v, want its claim", l)
	}
	time.Sleep(claim / 3)
	if got := f.retries(); len(got) != 2 {
		t.Fatalf("n8n was asked %v: the round did not end when n8n did not answer", got)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	wait(t, f, 2)
	testwait.For(t, "both re-runs started once n8n answered", func() bool {
		return e.last("later").Event == keystore.HistoryRerunStarted && e.last("after").Event == keystore.HistoryRerunStarted
	})
	if got := f.retries(); len(got) != 4 || got[0] != "41" || got[2] != "42" {
		t.Fatalf("retries %v: want 41 refused once, 42 failed and asked again, then 43", got)
	}
	for result, want := range map[string]float64{"refused": 1, "failed": 1, "started": 2} {
		if v := counter(t, reg, result); v != want {
			t.Errorf("n8n_guard_reruns_total{result=%s} = %v, want %v", result, v, want)
		}
	}
}

// One execution n8n cannot re-run now (still running, a 5xx for it)
// holds back no other: the others start at once, it is asked again when
// its claim goes stale. A destination that is paused (here a maintenance
// window) gets no re-run until it reopens: its gate would meet
// destination_paused and end the re-run without a write.
func TestOneExecutionOrAPausedDestinationHoldsBackNoOtherReRun(t *testing.T) {
	e := setup(t)
	e.atGate("busy", "41", "crm")
	e.atGate("held", "42", "erp")
	e.atGate("free", "43", "mail")
	e.grantInTurn("busy", "held", "free")
	until := time.Now().Add(700 * time.Millisecond)
	if _, err := e.store.HoldDestination(e.ctx, "erp", "Ana", "ERP upgrade", until); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running := true
	f := newN8n(func(id string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if id == "41" && running {
			return "", errors.New("execution 41 is running in n8n: asked again later")
		}
		return "new-" + id, nil
	})
	const claim = 400 * time.Millisecond
	_, reg := run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour, Claim: claim})
	wait(t, f, 2)
	if got := f.retries(); len(got) != 2 || got[0] != "41" || got[1] != "43" {
		t.Fatalf("n8n was asked %v: want 41 (running), then 43 at once; 42 waits for its destination", got)
	}
	mu.Lock()
	running = false
	mu.Unlock()
	wait(t, f, 2)
	got := f.retries()
	if !time.Now().After(until) {
		t.Errorf("a re-run was asked before erp's window ended: %v", got)
	}
	testwait.For(t, "all three started", func() bool {
		return e.last("busy").Event == keystore.HistoryRerunStarted && e.last("held").Event == keystore.HistoryRerunStarted &&
			e.last("free").Event == keystore.HistoryRerunStarted
	})
	if len(got) != 4 || got[2] == got[3] {
		t.Errorf("retries %v: want 41, 43, then 41 and 42 once each", got)
	}
	if v := counter(t, reg, "refused"); v != 0 {
		t.Errorf("%v re-runs refused, want none", v)
	}
}

// When a paused destination reopens it is half open: one re-run goes,
// its gate is the probe; the others wait for the probe (they would meet
// destination_paused, end without a write and be refused later).
func TestAReopenedDestinationTakesOneReRunAsItsProbe(t *testing.T) {
	e := setup(t)
	e.atGate("k1", "41", "erp")
	e.atGate("k2", "42", "erp")
	e.grant("k1")
	e.grant("k2")
	until := time.Now().Add(300 * time.Millisecond)
	if _, err := e.store.HoldDestination(e.ctx, "erp", "Ana", "ERP upgrade", until); err != nil {
		t.Fatal(err)
	}
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	wait(t, f, 1)
	if time.Now().Before(until) {
		t.Fatalf("a re-run was asked during the window: %v", f.retries())
	}
	time.Sleep(500 * time.Millisecond)
	if got := f.retries(); len(got) != 1 || got[0] != "41" {
		t.Fatalf("n8n was asked %v once the window ended, want only 41 (the probe); 42 waits for it", got)
	}
}

// A key whose holder names another namespace's execution (a reserving
// token can write any holder) is refused when its re-run comes; the
// execution's own key, granted with it, is re-run, and n8n is asked to
// retry once.
func TestAKeyNamingAnExecutionThatDidNotReserveItIsRefusedAndTheOwnKeyReRun(t *testing.T) {
	e := setup(t)
	e.atGate("forged-1", "41", "crm")
	e.atGate("own", "41", "crm")
	e.grant("forged-1")
	e.grant("own")
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	_, reg := run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	wait(t, f, 1)
	testwait.For(t, "the own key's re-run started and the forged one refused", func() bool {
		return e.last("own").Event == keystore.HistoryRerunStarted && e.last("forged-1").Event == keystore.HistoryRerunRefused
	})
	if got, l := f.retries(), e.last("forged-1"); len(got) != 1 || !strings.Contains(l.Detail, "is not one of workflow wf1") {
		t.Errorf("retries %v; the forged key says %q", got, l.Detail)
	}
	if v := counter(t, reg, "refused"); v != 1 {
		t.Errorf("%v refused, want 1", v)
	}
}

// Two guards on one store (replicas): one claims each re-run, so n8n is
// asked once; a grant withdrawn before the guard's turn is not asked at
// all.
func TestTwoGuardsAskN8nOnceAndAWithdrawnGrantNotAtAll(t *testing.T) {
	e := setup(t)
	e.atGate("k1", "41", "crm")
	e.atGate("k2", "42", "crm")
	e.grant("k1")
	e.grant("k2")
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	// The second re-run to crm waits a second for its pace: the person
	// withdraws it meanwhile (failed for good).
	run(t, e, f, rerun.Options{Pace: time.Second, Interval: time.Hour})
	run(t, e, f, rerun.Options{Pace: time.Second, Interval: time.Hour})
	wait(t, f, 1)
	if _, err := e.store.Resolve(e.ctx, keystore.ResolveRequest{Namespace: "crm", Key: "k2", Resolution: keystore.StateFailed, Final: true, By: "Ana", Note: "not needed"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if got := f.retries(); len(got) != 1 || got[0] != "41" {
		t.Fatalf("n8n was asked %v, want 41 once (and 42, withdrawn, not at all)", got)
	}
}

// A re-run n8n started that never reserved the key (its gate met a
// paused destination) is asked again once it is older than Started, for
// the execution n8n started.
func TestAStartedReRunThatNeverReservedTheKeyIsAskedAgain(t *testing.T) {
	e := setup(t)
	e.atGate("k1", "41", "crm")
	e.grant("k1")
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour, Started: 300 * time.Millisecond})
	wait(t, f, 2)
	if got := f.retries(); got[0] != "41" || got[1] != "new-41" {
		t.Fatalf("retries %v, want 41, then the re-run n8n started for it", got)
	}
}

// A person's note of nearly 2,000 characters still allows the other keys
// of the execution (their note names the first key before it, cut to the
// limit): none is left at the gate when n8n is asked.
func TestALongNoteStillAllowsTheOtherKeys(t *testing.T) {
	e := setup(t)
	e.atGate("a", "42", "crm")
	e.atGate("b", "42", "crm")
	if _, err := e.store.Resolve(e.ctx, keystore.ResolveRequest{Namespace: "crm", Key: "a", Resolution: keystore.StateFailed, Rerun: true,
		By: "Ana", Note: strings.Repeat("n", keystore.MaxNoteLength-10)}); err != nil {
		t.Fatal(err)
	}
	f := newN8n(func(id string) (string, error) { return "57", nil })
	run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	wait(t, f, 1)
	testwait.For(t, "both keys note the re-run", func() bool {
		return e.last("a").Event == keystore.HistoryRerunStarted && e.last("b").Event == keystore.HistoryRerunStarted
	})
}

func counter(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "n8n_guard_reruns_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A destination paused for one namespace alone (its failures were that
// namespace's only) holds back that namespace's re-runs: their gate would
// meet destination_paused, end without a write, and n8n would be asked
// again and again. Another namespace's re-run through the same
// destination goes at once, although granted later.
func TestADestinationPausedForOneNamespaceHoldsBackOnlyItsReRuns(t *testing.T) {
	e := setup(t)
	ctx := e.ctx
	must := func(r keystore.Result, err error) keystore.Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// billing writes through "shared" too: a key at its gate, then a
	// write that succeeds (the destination answered: no failure counts).
	bowner := "n8n wf1 exec 50"
	r := must(e.store.Reserve(ctx, keystore.ReserveRequest{Namespace: "billing", Key: "bk", Owner: bowner, Destination: "shared"}))
	must(e.store.Fail(ctx, keystore.FailRequest{Namespace: "billing", Key: "bk", Token: r.Token, Reason: keystore.ReasonDestinationFailed}))
	if g := must(e.store.Reserve(ctx, keystore.ReserveRequest{Namespace: "billing", Key: "bk", Owner: bowner, Destination: "shared", Rerun: true})); g.Outcome != keystore.OutcomeRerunNotGranted {
		t.Fatalf("billing's gate: %s", g.Outcome)
	}
	ok := must(e.store.Reserve(ctx, keystore.ReserveRequest{Namespace: "billing", Key: "b-ok", Owner: "n8n wf9 exec 9", Destination: "shared"}))
	must(e.store.Complete(ctx, keystore.CompleteRequest{Namespace: "billing", Key: "b-ok", Token: ok.Token}))
	// crm's key at its gate, then crm's own writes fail until crm alone is
	// paused.
	e.atGate("k1", "41", "shared")
	for i := 0; ; i++ {
		bs, err := e.store.Destinations(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(bs) == 1 && bs[0].StateFor("crm", time.Now()) == keystore.BreakerOpen && bs[0].StateFor("billing", time.Now()) == keystore.BreakerClosed {
			break
		}
		if i == 20 {
			t.Fatalf("crm's failures did not pause shared for crm alone: %+v", bs)
		}
		x := must(e.store.Reserve(ctx, keystore.ReserveRequest{Namespace: "crm", Key: fmt.Sprint("x", i), Owner: "n8n wf2 exec 2", Destination: "shared"}))
		if x.Token != "" {
			must(e.store.Fail(ctx, keystore.FailRequest{Namespace: "crm", Key: fmt.Sprint("x", i), Token: x.Token, Reason: keystore.ReasonDestinationUnreachable}))
		}
	}
	e.grant("k1") // crm's first
	// billing's grant must come later on the store's millisecond clock,
	// so that crm's is the older one the runner would take first.
	e.afterGrant("k1")
	must(e.store.Resolve(ctx, keystore.ResolveRequest{Namespace: "billing", Key: "bk", Resolution: keystore.StateFailed, Rerun: true, By: "Bo", Note: "ERP back"}))
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	r2, _ := run(t, e, f, rerun.Options{Pace: time.Millisecond, Interval: time.Hour})
	wait(t, f, 1)
	r2.Kick()
	testwait.For(t, "billing's re-run noted", func() bool {
		l, err := e.store.Lookup(ctx, "billing", "bk")
		return err == nil && l.Record != nil && keystore.LastTransition(l.Record).Event == keystore.HistoryRerunStarted
	})
	if got := f.retries(); len(got) != 1 || got[0] != "50" {
		t.Fatalf("n8n was asked %v: want billing's 50 only; crm's 41 waits while shared is paused for crm", got)
	}
	if l := e.last("k1"); l.Event == keystore.HistoryRerunStarted || l.Event == keystore.HistoryRerunStarting {
		t.Fatalf("crm's re-run went on while crm is paused: %+v", l)
	}
}
