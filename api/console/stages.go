package console

import (
	"context"
	"slices"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// What needs a person is read from the store's stage index
// (keystore.StageReader): the keys awaiting approval, the lost ones, the
// ones that may be overdue, each a query of its stage, never a walk of
// every parked key filtered here.

// keysAt returns the keys at stage st the session may see, by namespace
// and key, at most max of them; more says there are others. A session
// limited to some namespaces reads those namespaces only.
func (ui *Console) keysAt(ctx context.Context, sess *session, st keystore.Stage, max int) (recs []*keystore.Record, more bool, err error) {
	namespaces := []string{""} // every namespace
	if !sess.who.Unlimited() {
		namespaces = slices.Sorted(slices.Values(sess.who.Namespaces))
	}
	for _, ns := range namespaces {
		if ns != "" && keystore.CheckNamespace("namespace", ns) != nil {
			continue // no key can be in it
		}
		q := keystore.StageQuery{Stage: st, Namespace: ns}
		for {
			q.Limit = min(max-len(recs)+1, 1000) // one more tells whether there are others
			page, err := ui.store.KeysAtStage(ctx, q)
			if err != nil {
				return nil, false, err
			}
			for _, r := range page {
				if len(recs) == max {
					return recs, true, nil
				}
				recs = append(recs, r)
			}
			if len(page) < q.Limit {
				break
			}
			last := page[len(page)-1]
			q.AfterNamespace, q.AfterKey = last.Namespace, last.Key
		}
	}
	return recs, false, nil
}
