package bolt

import (
	"context"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// RecentEvents implements Store: the events bucket walked backwards from
// Before, filtered by kind and bulk. Events are kept for keystore.EventRetention, so the walk is
// bounded by a week of events.
func (s *Store) RecentEvents(_ context.Context, q keystore.EventQuery) ([]keystore.Event, error) {
	limit := keystore.EventLimit(q.Limit)
	var out []keystore.Event
	err := s.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		var k, v []byte
		if q.Before == 0 {
			k, v = c.Last()
		} else if k, v = c.Seek(u64(q.Before)); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && len(out) < limit; k, v = c.Prev() {
			ev, ok := s.readEvent(k, v)
			if ok && (len(q.Kinds) == 0 || slices.Contains(q.Kinds, ev.Kind)) && (q.Bulk == "" || ev.Bulk == q.Bulk) {
				out = append(out, ev)
			}
		}
		return nil
	})
	return out, s.readErr(err)
}
