package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

func withRequestID(id string) func(*keystore.ReserveRequest) {
	return func(r *keystore.ReserveRequest) { r.RequestID = id }
}

// runRepeats: repeating a request is safe. The reserve of an attempt
// whose answer was lost, sent again with its request_id, gets the same
// token; complete, fail and resolve repeated after success answer the
// same success.
func runRepeats(t *testing.T, newStore New) {
	const reqID = "exec 4711/Reserve contact"
	t.Run("lost answer: the same request_id gets the same token", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		first := e.reserve(ns, "evt_1", withRequestID(reqID))
		wantOutcome(t, first, keystore.OutcomeAccepted)
		if first.Replayed {
			t.Fatalf("the first answer is no repeat")
		}
		before := e.lookup(ns, "evt_1").Record
		e.clock.Advance(2 * time.Second)
		again := e.reserve(ns, "evt_1", withRequestID(reqID))
		wantOutcome(t, again, keystore.OutcomeAccepted)
		if again.Token != first.Token || !again.Proceed || !again.Replayed || again.Record.Attempt != 1 {
			t.Fatalf("repeat = %+v, want accepted with token %s, marked replayed", again, first.Token)
		}
		sameRecord(t, before, e.lookup(ns, "evt_1").Record) // a repeat writes nothing
		for name, mod := range map[string]func(*keystore.ReserveRequest){
			"another request_id": withRequestID("exec 4712/Reserve contact"),
			"no request_id":      func(*keystore.ReserveRequest) {},
		} {
			r := e.reserve(ns, "evt_1", mod)
			wantOutcome(t, r, keystore.OutcomeInProgress)
			if r.Token != "" {
				t.Fatalf("%s: got a token", name)
			}
		}
		wantOutcome(t, e.complete(ns, "evt_1", again.Token, "crm-1"), keystore.OutcomeCompleted)
		d := e.reserve(ns, "evt_1", withRequestID(reqID))
		wantOutcome(t, d, keystore.OutcomeDuplicate)
		if d.Token != "" || d.Record.ResultRef != "crm-1" {
			t.Fatalf("after complete: %+v", d)
		}
	})
	t.Run("the same request_id from another principal is a second copy", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		as := func(who string) func(*keystore.ReserveRequest) {
			return func(r *keystore.ReserveRequest) { r.RequestID, r.Principal = reqID, who }
		}
		first := e.reserve(ns, "evt_1", as("token:team-crm"))
		wantOutcome(t, first, keystore.OutcomeAccepted)
		e.restart() // the seal is read back from the store, not from memory
		for _, who := range []string{"token:team-billing", ""} {
			r := e.reserve(ns, "evt_1", as(who))
			wantOutcome(t, r, keystore.OutcomeInProgress)
			if r.Token != "" || r.Replayed {
				t.Fatalf("principal %q got the holder's token: %+v", who, r)
			}
		}
		again := e.reserve(ns, "evt_1", as("token:team-crm"))
		wantOutcome(t, again, keystore.OutcomeAccepted)
		if again.Token != first.Token || !again.Replayed {
			t.Fatalf("the holder's repeat = %+v", again)
		}
	})
	t.Run("the repeat's token survives a restart", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		first := e.reserve(ns, "evt_1", withRequestID(reqID))
		e.restart()
		again := e.reserve(ns, "evt_1", withRequestID(reqID))
		wantOutcome(t, again, keystore.OutcomeAccepted)
		if again.Token != first.Token {
			t.Fatalf("token after restart %q, want %q", again.Token, first.Token)
		}
	})
	t.Run("copies of one request at once all get the one token", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		var wg sync.WaitGroup
		tokens := make([]string, 20)
		for i := range tokens {
			wg.Go(func() {
				r, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", RequestID: reqID})
				if err != nil || r.Outcome != keystore.OutcomeAccepted {
					t.Errorf("copy %d: %v %+v", i, err, r)
					return
				}
				tokens[i] = r.Token
			})
		}
		wg.Wait()
		for _, tok := range tokens {
			if tok != tokens[0] {
				t.Fatalf("different tokens: %v", tokens)
			}
		}
		if a := e.lookup(ns, "evt_1").Record.Attempt; a != 1 {
			t.Fatalf("attempt %d, want 1", a)
		}
	})
	t.Run("after the lease ran out the repeat is not accepted", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		e.reserve(ns, "evt_1", withRequestID(reqID), func(r *keystore.ReserveRequest) { r.Lease = 10 * time.Second })
		e.clock.Advance(11 * time.Second)
		wantOutcome(t, e.reserve(ns, "evt_1", withRequestID(reqID)), keystore.OutcomeStateUnknown)
	})
	t.Run("a new attempt after a failure is a new token, whatever the request_id", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		first := e.reserve(ns, "evt_1", withRequestID(reqID))
		e.fail(ns, "evt_1", first.Token, keystore.ReasonDestinationFailed)
		next := e.reserve(ns, "evt_1", withRequestID(reqID))
		wantOutcome(t, next, keystore.OutcomeAccepted)
		if next.Token == first.Token || next.Replayed || next.Record.Attempt != 2 {
			t.Fatalf("new attempt = %+v", next)
		}
		if _, err := e.s.Complete(e.ctx, keystore.CompleteRequest{Namespace: ns, Key: "evt_1", Token: first.Token}); err == nil {
			t.Fatalf("the old attempt's token still completes")
		}
	})
	t.Run("a request_id over 128 characters is refused", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", RequestID: strings.Repeat("é", 129)})
		wantCode(t, err, errs.InvalidRequest)
		wantState(t, e.lookup(ns, "evt_1"), keystore.StateAbsent)
		_, err = e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", RequestID: "a\nb"})
		wantCode(t, err, errs.InvalidRequest)
	})
	t.Run("complete, fail and resolve repeated after success answer the same", func(t *testing.T) {
		e := setup(t, newStore, keystore.Policies{})
		r := e.reserve(ns, "evt_c")
		c1 := e.complete(ns, "evt_c", r.Token, "crm-1")
		c2 := e.complete(ns, "evt_c", r.Token, "crm-1")
		if c2.Outcome != c1.Outcome || !c2.Replayed {
			t.Fatalf("repeated complete: %+v", c2)
		}
		sameRecord(t, c1.Record, c2.Record)

		r = e.reserve(ns, "evt_f")
		f1 := e.fail(ns, "evt_f", r.Token, keystore.ReasonDestinationFailed)
		f2 := e.fail(ns, "evt_f", r.Token, keystore.ReasonDestinationFailed)
		if f2.Outcome != f1.Outcome || !f2.Replayed {
			t.Fatalf("repeated fail: %+v", f2)
		}
		sameRecord(t, f1.Record, f2.Record)

		r = e.reserve(ns, "evt_r")
		e.fail(ns, "evt_r", r.Token, keystore.ReasonOutcomeUnknown)
		for _, to := range []keystore.State{keystore.StateFailed, keystore.StateCompleted} {
			key := "evt_r"
			if to == keystore.StateCompleted {
				key = "evt_rc"
				r := e.reserve(ns, key)
				e.fail(ns, key, r.Token, keystore.ReasonOutcomeUnknown)
			}
			req := keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: to, By: "office manager", Note: "checked"}
			res1, err := e.s.Resolve(e.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Second)
			res2, err := e.s.Resolve(e.ctx, req)
			if err != nil {
				t.Fatalf("repeated resolve %s: %v", to, err)
			}
			if res2.Outcome != res1.Outcome || !res2.Replayed {
				t.Fatalf("repeated resolve %s: %+v", to, res2)
			}
			sameRecord(t, res1.Record, res2.Record)
		}
	})
}
