package keystore

import (
	"context"
	"iter"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Reading a listing to its end, page by page. Each store reads one page
// of a query; these iterators carry the cursor from page to page, so the
// callers that read every page (the catch-up, the re-runs, the checks)
// hold no loop and no stop rule of their own.
//
// Each yields the records in the store's order. A listing read to its
// end yields no error; one cut short yields exactly one, last: the
// store's read error, ctx's error when ctx ended between two pages (so a
// caller tells "read all" from "cut short" without looking at ctx), or an
// internal error when a store hands back a full page that does not move
// the cursor on (read again, it would loop for ever). Breaking out of
// the range stops the reads.

// pageLimit is the page size of a query that names none.
const pageLimit = 500

// Lister is the part of Store that lists records by ListQuery.
type Lister interface {
	List(ctx context.Context, q ListQuery) (Page, error)
}

// Listed yields every record q selects, from q.Cursor on, following each
// page's NextCursor.
func Listed(ctx context.Context, l Lister, q ListQuery) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		q := q
		q.Limit = pageSize(q.Limit)
		walk(ctx, yield, func() ([]*Record, bool, error) {
			page, err := l.List(ctx, q)
			if err != nil || page.NextCursor == "" {
				return page.Items, false, err
			}
			if page.NextCursor == q.Cursor {
				return nil, false, stuck("list", q.Cursor)
			}
			q.Cursor = page.NextCursor
			return page.Items, true, nil
		})
	}
}

// AtStage yields every key at q's stage after q's After, by namespace
// and key. A page shorter than q.Limit is the last.
func AtStage(ctx context.Context, r StageReader, q StageQuery) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		q := q
		q.Limit = pageSize(q.Limit)
		walk(ctx, yield, func() ([]*Record, bool, error) {
			recs, err := r.KeysAtStage(ctx, q)
			if err != nil || len(recs) < q.Limit {
				return recs, false, err
			}
			last := recs[len(recs)-1]
			if last.Namespace == q.AfterNamespace && last.Key == q.AfterKey {
				return nil, false, stuck("stage "+string(q.Stage), q.AfterNamespace+"/"+q.AfterKey)
			}
			q.AfterNamespace, q.AfterKey = last.Namespace, last.Key
			return recs, true, nil
		})
	}
}

// ByWait yields every parked key q selects after q's After, the longest
// waiting first. A page shorter than q.Limit is the last.
func ByWait(ctx context.Context, r WaitReader, q WaitQuery) iter.Seq2[*Record, error] {
	return func(yield func(*Record, error) bool) {
		q := q
		q.Limit = pageSize(q.Limit)
		walk(ctx, yield, func() ([]*Record, bool, error) {
			recs, err := r.ParkedByWait(ctx, q)
			if err != nil || len(recs) < q.Limit {
				return recs, false, err
			}
			next := q.Next(recs[len(recs)-1])
			if next.AfterSince.Equal(q.AfterSince) && next.AfterNamespace == q.AfterNamespace && next.AfterKey == q.AfterKey {
				return nil, false, stuck("wait", q.AfterNamespace+"/"+q.AfterKey)
			}
			q = next
			return recs, true, nil
		})
	}
}

// walk yields the records of the pages read reads, one after the other,
// while read says more follow; it reads no page once ctx ended or the
// consumer stopped.
func walk(ctx context.Context, yield func(*Record, error) bool, read func() (recs []*Record, more bool, err error)) {
	for {
		if err := ctx.Err(); err != nil {
			yield(nil, err)
			return
		}
		recs, more, err := read()
		if err != nil {
			yield(nil, err)
			return
		}
		for _, rec := range recs {
			if !yield(rec, nil) {
				return
			}
		}
		if !more {
			return
		}
	}
}

// pageSize is the limit a query's pages are read with: a page shorter
// than it ends the listing, so it is never more than a store returns
// (1000) nor 0.
func pageSize(limit int) int {
	if limit <= 0 {
		return pageLimit
	}
	return min(limit, 1000)
}

func stuck(listing, cursor string) error {
	return errs.Errorf(errs.Internal, "the %s listing does not move on past %q: the store returned a full page ending at its cursor", listing, cursor)
}
