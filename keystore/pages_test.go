package keystore_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// shelf is a store of parked keys that answers the three page reads
// (List, KeysAtStage, ParkedByWait) from one ordered slice, and fails
// the way a test asks it to.
type shelf struct {
	recs   []*keystore.Record
	failOn int   // the read (1, 2, ...) that fails; 0: none
	stuck  bool  // every read answers the first page, as if the cursor were ignored
	limits []int // the limit each read was asked with
}

var errRead = errors.New("disk on fire")

func newShelf(n int) *shelf {
	s := &shelf{}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i := range n {
		parked := at.Add(time.Duration(i) * time.Minute)
		s.recs = append(s.recs, &keystore.Record{Namespace: "crm", Key: fmt.Sprintf("k%04d", i), State: keystore.StateParked, ParkedAt: &parked})
	}
	return s
}

// page is the records after position from, up to limit (a store's
// default and cap applied), and the position after them.
func (s *shelf) page(from, limit int) ([]*keystore.Record, int, error) {
	s.limits = append(s.limits, limit)
	if len(s.limits) == s.failOn {
		return nil, 0, errRead
	}
	if len(s.limits) > 100 {
		return nil, 0, errors.New("read 100 pages: the listing does not end")
	}
	if s.stuck {
		from = 0
	}
	if limit <= 0 {
		limit = 100
	}
	to := min(from+min(limit, 1000), len(s.recs))
	return s.recs[from:to], to, nil
}

// after is the position after the record named by ns and key (0 for none).
func (s *shelf) after(ns, key string) int {
	if ns == "" && key == "" {
		return 0
	}
	return 1 + slices.IndexFunc(s.recs, func(r *keystore.Record) bool { return r.Namespace == ns && r.Key == key })
}

func (s *shelf) List(_ context.Context, q keystore.ListQuery) (keystore.Page, error) {
	from, _ := strconv.Atoi(q.Cursor)
	recs, to, err := s.page(from, q.Limit)
	p := keystore.Page{Items: recs}
	if to < len(s.recs) {
		p.NextCursor = strconv.Itoa(to)
	}
	return p, err
}

func (s *shelf) KeysAtStage(_ context.Context, q keystore.StageQuery) ([]*keystore.Record, error) {
	recs, _, err := s.page(s.after(q.AfterNamespace, q.AfterKey), q.Limit)
	return recs, err
}

func (s *shelf) ParkedByWait(_ context.Context, q keystore.WaitQuery) ([]*keystore.Record, error) {
	recs, _, err := s.page(s.after(q.AfterNamespace, q.AfterKey), q.Limit)
	return recs, err
}

// The three iterators hold the same contract: every record in order,
// one error last when cut short (a read error, ctx's, a store that does
// not move on), no read after the consumer stopped, and page sizes that
// end (0 is the default, above 1000 is 1000).
func TestPagesReadEveryPageOrSayWhyNot(t *testing.T) {
	kinds := map[string]func(context.Context, *shelf, int) iter.Seq2[*keystore.Record, error]{
		"list": func(ctx context.Context, s *shelf, limit int) iter.Seq2[*keystore.Record, error] {
			return keystore.Listed(ctx, s, keystore.ListQuery{State: keystore.StateParked, Limit: limit})
		},
		"stage": func(ctx context.Context, s *shelf, limit int) iter.Seq2[*keystore.Record, error] {
			return keystore.AtStage(ctx, s, keystore.StageQuery{Stage: keystore.PhaseWaiting, Limit: limit})
		},
		"wait": func(ctx context.Context, s *shelf, limit int) iter.Seq2[*keystore.Record, error] {
			return keystore.ByWait(ctx, s, keystore.WaitQuery{Limit: limit})
		},
	}
	cases := []struct {
		name   string
		recs   int
		limit  int
		failOn int
		stuck  bool
		stopAt int  // the consumer breaks after this many records (0: never)
		cancel bool // ctx ends as the consumer takes the first record
		want   int  // records yielded
		reads  int  // pages read (-1: not checked)
		err    func(error) bool
	}{
		{name: "several pages", recs: 12, limit: 5, want: 12, reads: 3},
		{name: "pages that fill up exactly", recs: 10, limit: 5, want: 10, reads: -1},
		{name: "no record", recs: 0, limit: 5, want: 0, reads: 1},
		{name: "an error on the second page", recs: 12, limit: 5, failOn: 2, want: 5, reads: 2,
			err: func(err error) bool { return errors.Is(err, errRead) }},
		{name: "the consumer breaks", recs: 12, limit: 5, stopAt: 3, want: 3, reads: 1},
		{name: "ctx ended between pages", recs: 12, limit: 5, cancel: true, want: 5, reads: 1,
			err: func(err error) bool { return errors.Is(err, context.Canceled) }},
		{name: "a store that does not move on", recs: 12, limit: 5, stuck: true, want: 5, reads: 2,
			err: func(err error) bool { return errs.CodeOf(err) == errs.Internal }},
		{name: "limit 0 reads pages of 500", recs: 12, limit: 0, want: 12, reads: 1},
		{name: "a limit above the stores' 1000", recs: 1200, limit: 2000, want: 1200, reads: 2},
	}
	for kind, seq := range kinds {
		for _, c := range cases {
			t.Run(kind+"/"+c.name, func(t *testing.T) {
				s := newShelf(c.recs)
				s.failOn, s.stuck = c.failOn, c.stuck
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				var got []string
				var errsSeen []error
				for rec, err := range seq(ctx, s, c.limit) {
					if err != nil {
						errsSeen = append(errsSeen, err)
						continue
					}
					if len(errsSeen) > 0 {
						t.Fatalf("a record after the error: %s", rec.Key)
					}
					got = append(got, rec.Key)
					if c.cancel {
						cancel()
					}
					if len(got) == c.stopAt {
						break
					}
				}
				if len(got) != c.want {
					t.Fatalf("got %d records, want %d", len(got), c.want)
				}
				for i, k := range got {
					if k != s.recs[i].Key {
						t.Fatalf("record %d is %s, want %s (in order, each once)", i, k, s.recs[i].Key)
					}
				}
				switch {
				case c.err == nil && len(errsSeen) > 0:
					t.Fatalf("errors %v, want none", errsSeen)
				case c.err != nil && (len(errsSeen) != 1 || !c.err(errsSeen[0])):
					t.Fatalf("errors %v, want exactly the one of the case", errsSeen)
				}
				if c.reads >= 0 && len(s.limits) != c.reads {
					t.Fatalf("%d reads (limits %v), want %d", len(s.limits), s.limits, c.reads)
				}
				for _, l := range s.limits {
					if want := wantLimit(c.limit); l != want {
						t.Fatalf("read with limit %d, want %d", l, want)
					}
				}
			})
		}
	}
}

// wantLimit is the page size the iterators read a limit with.
func wantLimit(limit int) int {
	if limit <= 0 {
		return 500
	}
	return min(limit, 1000)
}
