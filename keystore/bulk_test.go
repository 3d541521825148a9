package keystore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Every case of one key in a bulk decision: decided, or skipped and why.
func TestDecideBulkResolve(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	req, err := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm"}, Resolution: keystore.StateFailed,
		By: "ann", Note: "CRM incident", ID: "b-00000001"}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	rec := func(st keystore.State, mod ...func(*keystore.Record)) *keystore.Record {
		r := &keystore.Record{Namespace: "crm", Key: "k", State: st, Attempt: 1, UpdatedAt: earlier,
			History: []keystore.Transition{{At: earlier, Event: keystore.HistoryReserved, Attempt: 1}}}
		for _, m := range mod {
			m(r)
		}
		return r
	}
	lease := func(at time.Time) func(*keystore.Record) { return func(r *keystore.Record) { r.LeaseExpiresAt = &at } }
	reason := func(x keystore.Reason) func(*keystore.Record) { return func(r *keystore.Record) { r.Reason = x } }
	resolvedBy := func(detail, by, note string) func(*keystore.Record) {
		return func(r *keystore.Record) {
			r.Retryable, r.ResolvedBy, r.Note = true, by, note
			r.History = append(r.History, keystore.Transition{Event: keystore.HistoryResolved, By: by, Detail: detail})
		}
	}
	for _, c := range []struct {
		name string
		cur  *keystore.Record
		skip string
	}{
		{"unknown: decided", rec(keystore.StateUnknown), ""},
		{"failed: decided again with this reason", rec(keystore.StateFailed), ""},
		{"reserved, lease ran out: decided", rec(keystore.StateReserved, lease(earlier)), ""},
		{"parked, execution lost: decided", rec(keystore.StateParked, reason(keystore.ReasonResumeLost)), ""},
		{"parked, waiting for the catch-up", rec(keystore.StateParked, reason(keystore.ReasonDestinationUnreachable)), keystore.SkipParkedWaiting},
		{"reserved, live lease", rec(keystore.StateReserved, lease(later)), keystore.SkipLiveLease},
		{"awaiting approval", rec(keystore.StateParked, reason(keystore.ReasonAwaitingApproval)), keystore.SkipAwaitingApproval},
		{"approval rejected", rec(keystore.StateFailed, reason(keystore.ReasonApprovalRejected)), keystore.SkipAwaitingApproval},
		{"completed", rec(keystore.StateCompleted), keystore.SkipCompleted},
		{"decided by this bulk (failed for good too)", rec(keystore.StateFailed, resolvedBy("bulk b-00000001, failed for good: x", "ann", "x")), keystore.SkipDecided},
		{"the same decision made one by one", rec(keystore.StateFailed, resolvedBy("failed: CRM incident", "ann", "CRM incident")), keystore.SkipDecided},
		{"another bulk's decision: decided", rec(keystore.StateFailed, resolvedBy("bulk b-00000002, failed: x", "bob", "x")), ""},
		{"gone", nil, keystore.SkipChanged},
		{"another namespace now", rec(keystore.StateUnknown, func(r *keystore.Record) { r.Namespace = "mail" }), keystore.SkipChanged},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, skip, err := keystore.DecideBulkResolve(c.cur, req, keystore.NamespacePolicy{Retention: time.Hour}, now)
			if err != nil || skip != c.skip {
				t.Fatalf("skip %q err %v, want skip %q", skip, err, c.skip)
			}
			if skip != "" {
				if st.Record != nil || len(st.Events) != 0 {
					t.Fatalf("a skipped key writes %+v", st)
				}
				return
			}
			last := st.Record.History[len(st.Record.History)-1]
			if st.Record.State != keystore.StateFailed || last.By != "ann" || !strings.HasPrefix(last.Detail, "bulk b-00000001, failed: ") ||
				len(st.Events) != 1 || st.Events[0].Kind != keystore.EventKeyResolved {
				t.Fatalf("decided: %+v", st)
			}
		})
	}
}

func TestBulkResolveRequestNormalize(t *testing.T) {
	req, err := keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm"}, Resolution: keystore.StateFailed, By: " ann ", Note: " x "}.Normalize()
	if err != nil || req.By != "ann" || req.Note != "x" || len(req.ID) != 10 || !strings.HasPrefix(req.ID, "b-") {
		t.Fatalf("%+v %v", req, err)
	}
	some := keystore.Filter{Namespace: "crm"}
	for name, bad := range map[string]keystore.BulkResolveRequest{
		"no person":       {Filter: some, Resolution: keystore.StateFailed, Note: "x"},
		"final completed": {Filter: some, Resolution: keystore.StateCompleted, Final: true, By: "a", Note: "x"},
		"id with a space": {Filter: some, Resolution: keystore.StateFailed, By: "a", Note: "x", ID: "b 1"},
		"no selection":    {Resolution: keystore.StateFailed, By: "a", Note: "x"},
		"blank selection": {Filter: keystore.Filter{Namespace: " ", Text: " "}, Resolution: keystore.StateFailed, By: "a", Note: "x"},
		"bad filter":      {Filter: keystore.Filter{Namespace: "Bad NS"}, Resolution: keystore.StateFailed, By: "a", Note: "x"},
	} {
		if _, err := bad.Normalize(); errs.CodeOf(err) != errs.InvalidRequest {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A bulk id names one decision: kept at its first run, the same content
// again is a repeat, other content a conflict naming the id.
func TestDecideBulkAction(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	norm := func(r keystore.BulkResolveRequest) keystore.BulkResolveRequest {
		r, err := r.Normalize()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	req := norm(keystore.BulkResolveRequest{Filter: keystore.Filter{Namespace: "crm", States: []keystore.State{keystore.StateUnknown, keystore.StateFailed}},
		Resolution: keystore.StateFailed, By: "ann", Note: "CRM incident", ID: "b-00000001"})
	kept, err := keystore.DecideBulkAction(nil, req, now)
	if err != nil || kept == nil || kept.ID != req.ID || len(kept.Content) != 16 || !kept.At.Equal(now) {
		t.Fatalf("a new id: %+v %v", kept, err)
	}
	same := req
	same.Filter.States = []keystore.State{keystore.StateFailed, keystore.StateUnknown}
	if next, err := keystore.DecideBulkAction(kept, same, now.Add(time.Minute)); next != nil || err != nil {
		t.Fatalf("the same content (states in another order): %+v %v, want a repeat", next, err)
	}
	for name, mod := range map[string]func(*keystore.BulkResolveRequest){
		"note":       func(r *keystore.BulkResolveRequest) { r.Note = "another incident" },
		"selection":  func(r *keystore.BulkResolveRequest) { r.Filter.Namespace = "mail" },
		"resolution": func(r *keystore.BulkResolveRequest) { r.Resolution = keystore.StateCompleted },
		"final":      func(r *keystore.BulkResolveRequest) { r.Final = true },
		"person":     func(r *keystore.BulkResolveRequest) { r.By = "bob" },
		"result":     func(r *keystore.BulkResolveRequest) { r.ResultRef = "crm-1" },
		"time range": func(r *keystore.BulkResolveRequest) { r.Filter.To = now },
	} {
		other := req
		other.Filter.States = slices.Clone(req.Filter.States)
		mod(&other)
		next, err := keystore.DecideBulkAction(kept, other, now)
		var e *errs.Error
		if next != nil || !errors.As(err, &e) || e.Code != errs.Conflict || len(e.Fields) != 1 || e.Fields[0].Field != "id" || !strings.Contains(e.Message, req.ID) {
			t.Errorf("another %s under the same id: %+v %v, want conflict naming the id", name, next, err)
		}
	}
}
