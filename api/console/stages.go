package console

import (
	"context"
	"slices"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// What needs a person is read from the store's stage index
// (keystore.StageReader): the keys awaiting approval, the lost ones, the
// overdue ones (a query of the parked keys by the start of their wait,
// up to their namespace's parked_limit), never a walk of every parked key
// filtered here.

// keysAt returns the keys at stage st the session may see, by namespace
// and key, at most max of them; more says there are others. A session
// limited to some namespaces reads those namespaces only.
func (ui *Console) keysAt(ctx context.Context, sess *session, st keystore.Stage, max int) (recs []*keystore.Record, more bool, err error) {
	for _, ns := range sessionNamespaces(sess) {
		q := keystore.StageQuery{Stage: st, Namespace: ns}
		recs, more, err = readUpTo(recs, max, func(limit int) ([]*keystore.Record, error) {
			q.Limit = limit
			page, err := ui.store.KeysAtStage(ctx, q)
			if len(page) > 0 {
				q.AfterNamespace, q.AfterKey = page[len(page)-1].Namespace, page[len(page)-1].Key
			}
			return page, err
		})
		if err != nil || more {
			return recs, more, err
		}
	}
	return recs, false, nil
}

// overdueKeys returns the parked keys the session may see that waited
// their namespace's parked_limit or longer (at the stages where that makes
// them overdue, keystore.OverdueStages), at most max of them; more says
// there are others. They are read from the store's index of the wait
// (keystore.WaitReader), one read per parked_limit
// (keystore.Policies.OverdueReads): only overdue keys are read, however
// many wait within their limit.
func (ui *Console) overdueKeys(ctx context.Context, sess *session, max int) (recs []*keystore.Record, more bool, err error) {
	now := ui.now()
	var reads []keystore.WaitQuery
	for _, ns := range sessionNamespaces(sess) {
		reads = append(reads, ui.policies.OverdueReads(keystore.WaitQuery{Namespace: ns, Stages: keystore.OverdueStages}, now)...)
	}
	for _, q := range reads {
		recs, more, err = ui.readWaiting(ctx, recs, max, q)
		if err != nil || more {
			return recs, more, err
		}
	}
	return recs, false, nil
}

// readWaiting appends to recs the keys of q, the longest waiting first,
// up to max in all; more says there are others.
func (ui *Console) readWaiting(ctx context.Context, recs []*keystore.Record, max int, q keystore.WaitQuery) ([]*keystore.Record, bool, error) {
	return readUpTo(recs, max, func(limit int) ([]*keystore.Record, error) {
		q.Limit = limit
		page, err := ui.store.ParkedByWait(ctx, q)
		if len(page) > 0 {
			q = q.Next(page[len(page)-1])
		}
		return page, err
	})
}

// sessionNamespaces are the namespaces a session's reads name: "" (every
// namespace) for a session without limits, else its own, sorted (those
// no key can be in left out).
func sessionNamespaces(sess *session) []string {
	if sess.who.Unlimited() {
		return []string{""}
	}
	var out []string
	for _, ns := range slices.Sorted(slices.Values(sess.who.Namespaces)) {
		if keystore.CheckNamespace("namespace", ns) == nil {
			out = append(out, ns)
		}
	}
	return out
}

// readUpTo appends to recs the pages page(limit) reads, each on from the
// last, until max records in all; more says there are others.
func readUpTo(recs []*keystore.Record, max int, page func(limit int) ([]*keystore.Record, error)) (_ []*keystore.Record, more bool, err error) {
	for {
		limit := min(max-len(recs)+1, 1000) // one more tells whether there are others
		got, err := page(limit)
		if err != nil {
			return nil, false, err
		}
		for _, r := range got {
			if len(recs) == max {
				return recs, true, nil
			}
			recs = append(recs, r)
		}
		if len(got) < limit {
			return recs, false, nil
		}
	}
}
