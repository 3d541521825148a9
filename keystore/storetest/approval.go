package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Approval before writing (keystore/approval.go): a gated namespace parks
// each new event until a person approves or rejects it.

const gatedNS = "invoices"

func approvalStore(t *testing.T, e *env) keystore.ApprovalStore {
	t.Helper()
	return e.s
}

func (e *env) decide(reject bool, key, by, note string) (keystore.Result, error) {
	req := keystore.ApprovalRequest{Namespace: gatedNS, Key: key, By: by, Note: note}
	if reject {
		return approvalStore(e.t, e).Reject(e.ctx, req)
	}
	return approvalStore(e.t, e).Approve(e.ctx, req)
}

// invoice is the content of the event a gated reserve asks approval for.
var invoice = withPayload(`{"invoice":"inv_1","amount":1200}`)

func requestedBy(who string) func(*keystore.ReserveRequest) {
	return func(r *keystore.ReserveRequest) { r.RequestedBy = who }
}

func (e *env) claimGated(key string) bool {
	e.t.Helper()
	_, ok, err := parkStore(e.t, e).ClaimResume(e.ctx, gatedNS, key, 30*time.Second)
	if err != nil {
		e.t.Fatalf("claim %s: %v", key, err)
	}
	return ok
}

func runApproval(t *testing.T, newStore New) {
	pol := keystore.Policies{
		Namespaces:   map[string]keystore.NamespacePolicy{gatedNS: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}},
		Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1}},
	}
	t.Run("a gated reserve parks awaiting approval; copies write nothing; no resume_url is refused", func(t *testing.T) {
		e := setup(t, newStore, pol)
		p := e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("201"), requestedBy("ann"), invoice)
		wantOutcome(t, p, keystore.OutcomeParked)
		if p.Proceed || p.Token != "" || p.Record.State != keystore.StateParked || p.Record.Reason != keystore.ReasonAwaitingApproval || p.Record.ResumeURL != resumeBase+"201" {
			t.Fatalf("awaiting answer: %+v %+v", p, p.Record)
		}
		e.restart()
		before := e.lookup(gatedNS, "inv_1")
		if keystore.RequestedBy(before.Record) != "ann" {
			t.Fatalf("requested_by lost: %+v", before.Record.History)
		}
		copy := e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("202"), requestedBy("ann"), invoice)
		wantOutcome(t, copy, keystore.OutcomeParked)
		sameRecord(t, before.Record, e.lookup(gatedNS, "inv_1").Record)

		_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: gatedNS, Key: "inv_2", Destination: "hubspot", Fingerprint: "inv_2 v1"})
		wantCode(t, err, errs.ApprovalRequired)
		if r := e.lookup(gatedNS, "inv_2"); r.Record != nil {
			t.Fatalf("a refused reserve wrote %+v", r.Record)
		}
		// Not the catch-up runner's: not in its queue, not claimable.
		if keys := parkedKeys(t, e, "hubspot"); len(keys) != 0 {
			t.Fatalf("catch-up queue holds %v", keys)
		}
		if counts, err := parkStore(t, e).ParkedCounts(e.ctx); err != nil || counts["hubspot"] != 0 {
			t.Fatalf("parked counts %v %v", counts, err)
		}
		if e.claimGated("inv_1") {
			t.Fatal("a key awaiting approval was claimed for resuming")
		}
		page, err := e.s.List(e.ctx, keystore.ListQuery{Namespace: gatedNS, State: keystore.StateParked})
		if err != nil || len(page.Items) != 1 || page.Items[0].Key != "inv_1" {
			t.Fatalf("list of parked keys: %v %v", page.Items, err)
		}
		var requested int
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventApprovalRequested && ev.Key == "inv_1" {
				requested++
			}
		}
		if requested != 1 {
			t.Fatalf("%d approval_requested events, want 1 (copies make no second request)", requested)
		}
	})

	t.Run("approve: four eyes, resumable, re-reserve accepted, a late approve changes nothing", func(t *testing.T) {
		e := setup(t, newStore, pol)
		e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("301"), requestedBy("ann"), invoice)
		before := e.lookup(gatedNS, "inv_1")
		_, err := e.decide(false, "inv_1", "ann", "")
		wantCode(t, err, errs.Forbidden)
		sameRecord(t, before.Record, e.lookup(gatedNS, "inv_1").Record)

		a, err := e.decide(false, "inv_1", "bob", "amount checked")
		if err != nil || a.Outcome != keystore.OutcomeApproved || a.Record.Reason != keystore.ReasonApproved || a.Record.ResolvedBy != "bob" {
			t.Fatalf("approve: %+v %v", a, err)
		}
		e.restart()
		approved := e.lookup(gatedNS, "inv_1")
		again, err := e.decide(false, "inv_1", "carl", "")
		if err != nil || again.Outcome != keystore.OutcomeApproved || !again.Replayed {
			t.Fatalf("second approve: %+v %v", again, err)
		}
		sameRecord(t, approved.Record, e.lookup(gatedNS, "inv_1").Record)
		_, err = e.decide(true, "inv_1", "carl", "too late")
		wantCode(t, err, errs.Conflict)
		// A copy before the resume: parked, nothing written.
		wantOutcome(t, e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("302")), keystore.OutcomeParked)

		if !e.claimGated("inv_1") {
			t.Fatal("an approved key could not be claimed for resuming")
		}
		if _, err := parkStore(t, e).ResumeAnswered(e.ctx, gatedNS, "inv_1", *approved.Record.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		r := e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("301"), invoice)
		wantOutcome(t, r, keystore.OutcomeAccepted)
		if r.Record.Attempt != 1 {
			t.Fatalf("attempt %d", r.Record.Attempt)
		}
		wantOutcome(t, e.complete(gatedNS, "inv_1", r.Token, "crm-1"), keystore.OutcomeCompleted)
		done := e.lookup(gatedNS, "inv_1")
		late, err := e.decide(false, "inv_1", "bob", "")
		if err != nil || late.Outcome != keystore.OutcomeApproved || !late.Replayed {
			t.Fatalf("late approve: %+v %v", late, err)
		}
		sameRecord(t, done.Record, e.lookup(gatedNS, "inv_1").Record)
		var who []string
		for _, h := range done.Record.History {
			if h.Event == keystore.HistoryApproved {
				who = append(who, h.By)
			}
		}
		if len(who) != 1 || who[0] != "bob" {
			t.Fatalf("history approvals %v, want [bob]", who)
		}
	})

	t.Run("reject: copies answer rejected, the resume ends the key failed for good", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("401"), requestedBy("ann"), invoice)
		_, err := e.decide(true, "inv_1", "bob", "")
		wantCode(t, err, errs.InvalidRequest)
		rj, err := e.decide(true, "inv_1", "bob", "wrong amount")
		if err != nil || rj.Outcome != keystore.OutcomeRejected || rj.Record.Retryable || rj.Record.Message != "wrong amount" {
			t.Fatalf("reject: %+v %v", rj, err)
		}
		parkedAt := *rj.Record.ParkedAt
		wantOutcome(t, e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("402")), keystore.OutcomeRejected)
		// hubspot is paused, but a rejected execution writes nothing there.
		if !e.claimGated("inv_1") {
			t.Fatal("a rejected key could not be claimed while its destination is paused")
		}
		if _, err := parkStore(t, e).ResumeAnswered(e.ctx, gatedNS, "inv_1", parkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		e.restart()
		f := e.lookup(gatedNS, "inv_1")
		if f.Record.State != keystore.StateFailed || f.Record.Retryable || f.Record.Reason != keystore.ReasonApprovalRejected || f.Record.ExpiresAt == nil {
			t.Fatalf("after the resume: %+v", f.Record)
		}
		wantOutcome(t, e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("401")), keystore.OutcomeRejected)
		_, err = e.decide(false, "inv_1", "carl", "")
		wantCode(t, err, errs.Conflict)
		again, err := e.decide(true, "inv_1", "carl", "still wrong")
		if err != nil || !again.Replayed || again.Outcome != keystore.OutcomeRejected {
			t.Fatalf("second reject: %+v %v", again, err)
		}
		sameRecord(t, f.Record, e.lookup(gatedNS, "inv_1").Record)
	})

	t.Run("an approval binds the content it was requested with", func(t *testing.T) {
		e := setup(t, newStore, pol)
		// A request without content would approve nothing in particular.
		_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: gatedNS, Key: "inv_0", Destination: "hubspot", ResumeURL: resumeBase + "600", RequestedBy: "ann"})
		wantField(t, err, errs.InvalidRequest, "payload", "required_without=fingerprint")
		if r := e.lookup(gatedNS, "inv_0"); r.Record != nil {
			t.Fatalf("a request without content wrote %+v", r.Record)
		}
		if evs := e.events(); len(evs) != 0 {
			t.Fatalf("a request without content made events %+v", evs)
		}

		e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("601"), requestedBy("ann"), invoice)
		e.reserve(gatedNS, "inv_2", withDest("hubspot"), withResume("602"), requestedBy("ann"), func(r *keystore.ReserveRequest) { r.Fingerprint = "inv_2 v1" })
		for _, key := range []string{"inv_1", "inv_2"} {
			if _, err := e.decide(false, key, "bob", "amount checked"); err != nil {
				t.Fatal(err)
			}
			if !e.claimGated(key) {
				t.Fatalf("%s: not claimed", key)
			}
		}
		e.restart()
		woken := e.lookup(gatedNS, "inv_1").Record
		for name, c := range map[string]struct {
			mod  func(*keystore.ReserveRequest)
			code errs.Code
		}{
			"another payload":                        {withPayload(`{"invoice":"inv_1","amount":99999}`), errs.KeyReused},
			"no payload":                             {func(*keystore.ReserveRequest) {}, errs.InvalidRequest},
			"a fingerprint where a payload was sent": {func(r *keystore.ReserveRequest) { r.Fingerprint = "inv_1" }, errs.KeyReused},
		} {
			req := keystore.ReserveRequest{Namespace: gatedNS, Key: "inv_1", Destination: "hubspot", ResumeURL: resumeBase + "601"}
			c.mod(&req)
			_, err := e.s.Reserve(e.ctx, req)
			if errs.CodeOf(err) != c.code {
				t.Fatalf("the woken reserve with %s: %v, want %s", name, err, c.code)
			}
			sameRecord(t, woken, e.lookup(gatedNS, "inv_1").Record)
		}
		_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: gatedNS, Key: "inv_2", Destination: "hubspot", ResumeURL: resumeBase + "602", Fingerprint: "inv_2 v2"})
		wantCode(t, err, errs.KeyReused)

		// The approved content, spelled another way, writes.
		r := e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("601"), withPayload(`{"amount":1200.0, "invoice":"inv_1"}`))
		wantOutcome(t, r, keystore.OutcomeAccepted)
		wantOutcome(t, e.reserve(gatedNS, "inv_2", withDest("hubspot"), withResume("602"), func(r *keystore.ReserveRequest) { r.Fingerprint = "inv_2 v1" }), keystore.OutcomeAccepted)
		// A retry after a failure is not asked again, and so must carry it too.
		wantOutcome(t, e.fail(gatedNS, "inv_1", r.Token, keystore.ReasonDestinationFailed), keystore.OutcomeDestinationFailed)
		failed := e.lookup(gatedNS, "inv_1").Record
		_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: gatedNS, Key: "inv_1", Destination: "hubspot"})
		wantField(t, err, errs.InvalidRequest, "payload", "required_without=fingerprint")
		_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: gatedNS, Key: "inv_1", Destination: "hubspot", Payload: []byte(`{"invoice":"inv_1","amount":99999}`)})
		wantCode(t, err, errs.KeyReused)
		sameRecord(t, failed, e.lookup(gatedNS, "inv_1").Record)
		retry := e.reserve(gatedNS, "inv_1", withDest("hubspot"), invoice)
		if retry.Outcome != keystore.OutcomeAccepted || retry.Record.Attempt != 2 {
			t.Fatalf("retry with the approved content: %+v", retry)
		}
	})

	t.Run("approve and reject at once: exactly one decides", func(t *testing.T) {
		e := setup(t, newStore, pol)
		e.reserve(gatedNS, "inv_1", withResume("501"), invoice)
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := map[keystore.Outcome]int{}
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := e.decide(i%2 == 1, "inv_1", "bob", "why")
				if err == nil && !r.Replayed {
					mu.Lock()
					won[r.Outcome]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 || won[keystore.OutcomeApproved]+won[keystore.OutcomeRejected] != 1 {
			t.Fatalf("decisions written: %v, want exactly one", won)
		}
	})

	t.Run("four eyes compares the persons people: names, each spelled once", func(t *testing.T) {
		people, err := keystore.NewPeople(map[string][]string{"ann": {"ann@example.com", "U0ANN"}, "bob": {"U0BOB"}})
		if err != nil {
			t.Fatal(err)
		}
		withPeople := pol
		withPeople.People = people
		e := setup(t, newStore, withPeople)
		e.reserve(gatedNS, "inv_1", withDest("hubspot"), withResume("701"), requestedBy(" Ann@Example.com\u00a0"), invoice)
		before := e.lookup(gatedNS, "inv_1")
		if rb := keystore.RequestedBy(before.Record); rb != "Ann@Example.com" {
			t.Fatalf("requested_by recorded as %q, want its one spelling (trimmed, NFKC, its case kept)", rb)
		}
		_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: gatedNS, Key: "inv_2", Destination: "hubspot", ResumeURL: resumeBase + "702",
			Fingerprint: "inv_2 v1", RequestedBy: "ann@example.com\u200b"})
		wantCode(t, err, errs.InvalidRequest)
		if r := e.lookup(gatedNS, "inv_2"); r.Record != nil {
			t.Fatalf("a refused reserve wrote %+v", r.Record)
		}
		for _, who := range [][]string{{"Ann (Slack U0ANN)", "U0ANN"}, {"Eve (Slack U0EVE)", "U0EVE"}} {
			_, err := approvalStore(t, e).Approve(e.ctx, keystore.ApprovalRequest{Namespace: gatedNS, Key: "inv_1", By: who[0], Identities: who[1:]})
			wantCode(t, err, errs.Forbidden)
			sameRecord(t, before.Record, e.lookup(gatedNS, "inv_1").Record)
		}
		a, err := approvalStore(t, e).Approve(e.ctx, keystore.ApprovalRequest{Namespace: gatedNS, Key: "inv_1", By: "Bob (Slack U0BOB)", Identities: []string{"U0BOB"}})
		if err != nil || a.Outcome != keystore.OutcomeApproved {
			t.Fatalf("another person's approval: %+v %v", a, err)
		}
	})
}
