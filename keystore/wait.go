package keystore

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Parked keys by the start of their wait (Record.WaitingSince: the first
// of their parkings in a row, kept across re-parks in a rolling outage).
// Each store keeps them in an index ordered by that time, so "the keys
// waiting since before T" is one range read that stops at the first key
// that began to wait later: the overdue keys are read, never the keys
// that wait within their namespace's parked_limit.

// WaitReader lists parked keys by the start of their wait; storetest
// checks it on every store.
type WaitReader interface {
	// ParkedByWait lists the parked keys q selects, the longest waiting
	// first (then by namespace and key).
	ParkedByWait(ctx context.Context, q WaitQuery) ([]*Record, error)
}

// WaitQuery selects parked keys by the start of their wait.
type WaitQuery struct {
	Destination string // "": every destination
	Namespace   string // "": every namespace
	// Except leaves these namespaces out (with Namespace ""): they are
	// read on their own, with a limit of their own (OverdueReads).
	Except []string
	// Stages keeps the keys at these parked phases; none: every parked
	// key (lost and approval keys included).
	Stages []Stage
	// Until keeps the keys whose wait began at or before it (zero: any);
	// the read stops at the first key that began to wait later.
	Until time.Time
	Limit int // 1..1000, default 100
	// After continues a listing: the wait start, namespace and key of the
	// last item of the previous page (WaitQuery.Next).
	AfterSince               time.Time
	AfterNamespace, AfterKey string
}

// QueuedStages are the parked phases the catch-up resumes (waiting,
// claimed): its queue. OverdueStages add the keys n8n woke whose
// executions have not reserved again: each of them is overdue past its
// namespace's parked_limit (WordsOf).
var (
	QueuedStages  = []Stage{PhaseWaiting, PhaseClaimed}
	OverdueStages = []Stage{PhaseWaiting, PhaseClaimed, PhaseResumed}
)

// parkedStages are the stages a parked key can be at.
var parkedStages = []Stage{PhaseWaiting, PhaseClaimed, PhaseResumed, PhaseLost, PhaseAwaitingApproval, PhaseApproved, PhaseRejected}

// Normalize checks the destination, namespaces and stages and applies the
// limits.
func (q WaitQuery) Normalize() (WaitQuery, error) {
	var v violations
	if q.Destination != "" {
		v.add(CheckNamespace("destination", q.Destination))
	}
	for _, ns := range append([]string{q.Namespace}, q.Except...) {
		if ns != "" {
			v.add(CheckNamespace("namespace", ns))
		}
	}
	for _, st := range q.Stages {
		if !slices.Contains(parkedStages, st) {
			v.add(errs.InvalidField("stages", "oneof", "stages must be parked phases (waiting, claimed, resumed, lost, awaiting_approval, approved, rejected)"))
		}
	}
	if err := v.err(); err != nil {
		return q, err
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	q.Limit = min(q.Limit, 1000)
	return q, nil
}

// Next is q continued after last, the last record of its page.
func (q WaitQuery) Next(last *Record) WaitQuery {
	if since := last.WaitingSince(); since != nil {
		q.AfterSince = *since
	}
	q.AfterNamespace, q.AfterKey = last.Namespace, last.Key
	return q
}

// Keeps reports whether q selects r (its place in the order aside): the
// one statement of the query's filters, which every store's index read
// applies and storetest holds them to.
func (q WaitQuery) Keeps(r *Record) bool {
	since := r.WaitingSince()
	return r.State == StateParked && since != nil &&
		(q.Destination == "" || r.Destination == q.Destination) &&
		(q.Namespace == "" || r.Namespace == q.Namespace) && !slices.Contains(q.Except, r.Namespace) &&
		(len(q.Stages) == 0 || slices.Contains(q.Stages, StageOf(r))) &&
		(q.Until.IsZero() || !since.After(q.Until))
}

// OverdueReads are the reads of the keys of q (its destination, stages
// and namespace) that waited their namespace's parked_limit or longer at
// now. Namespaces differ in their limits, so each namespace configured
// with a limit other than the default is read on its own, up to its
// limit, and every other namespace in one read up to the default: only
// overdue keys are read, however many wait within their limit. (Reading
// every namespace from the smallest limit would read, with one namespace
// at 8m and the default of 3 days, every key that waited 8 minutes.)
// A key reported overdue under a smaller limit than today's is overdue
// again once it waited today's.
func (p Policies) OverdueReads(q WaitQuery, now time.Time) []WaitQuery {
	at := func(q WaitQuery, limit time.Duration) WaitQuery {
		q.Until = now.Add(-limit)
		return q
	}
	if q.Namespace != "" {
		return []WaitQuery{at(q, p.Namespace(q.Namespace).ParkedLimit)}
	}
	var reads []WaitQuery
	rest := q
	rest.Except = slices.Clone(q.Except)
	for _, ns := range slices.Sorted(maps.Keys(p.Namespaces)) {
		if limit := p.Namespace(ns).ParkedLimit; limit != DefaultParkedLimit && ValidNamespace(ns) {
			own := q
			own.Namespace = ns
			reads = append(reads, at(own, limit))
			rest.Except = append(rest.Except, ns)
		}
	}
	return append(reads, at(rest, DefaultParkedLimit))
}
