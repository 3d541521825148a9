package keystore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/internal/redact"
)

// Why a key a bulk decision selected is left as it is (BulkResult.Skipped).
const (
	SkipLiveLease        = "live_lease"        // an attempt holds a lease that has not run out
	SkipAwaitingApproval = "awaiting_approval" // approvals decide it (POST /v1/approve, /v1/reject)
	SkipCompleted        = "completed"         // a completed key is not reopened
	SkipParkedWaiting    = "parked_waiting"    // its n8n execution waits for the guard's resume call; a decision would strand it (ResolveParked)
	SkipDecided          = "already_decided"   // this bulk action (or the same decision) decided it before
	SkipChanged          = "no_longer_matches" // it changed between the selection and the decision
	SkipConflict         = "conflict"          // any other state a resolution does not apply to
	SkipNoRerunGate      = "no_rerun_gate"     // a re-run was asked, and no execution of the key waits at a re-run gate
	SkipDamaged          = "record_damaged"    // its record cannot be read (docs/runbooks.md)
)

// BulkBatch is how many keys a store decides in one write transaction: a
// transaction short enough not to hold up the writes of live executions,
// long enough that 100,000 keys do not take 100,000 commits.
const BulkBatch = 250

// Normalize checks a bulk decision, trims it and gives it an ID when it has
// none; every broken field is reported in one error.
func (req BulkResolveRequest) Normalize() (BulkResolveRequest, error) {
	var v violations
	f, err := req.Filter.Normalize()
	v.add(err)
	if err == nil && f.Empty() {
		// The one rule for every caller (API, console, CLI, tools): there
		// is no form of "every key"; a selection is always written out.
		v.field("filter", "required", "a bulk decision needs a selection (namespace, destination, states, reason, holder, key_prefix, text, from or to): it never takes every key of the store")
	}
	req.Filter = f
	req.By, req.Note, req.ID = strings.TrimSpace(req.By), strings.TrimSpace(req.Note), strings.TrimSpace(req.ID)
	req.ResultRef = strings.TrimSpace(req.ResultRef)
	v.check(struct {
		Resolution State  `json:"resolution" validate:"required,oneof=completed failed"`
		By         string `json:"by" validate:"required,max=128,utf8,no_control,no_format"`
		Note       string `json:"note" validate:"required,max=2000,utf8"`
		ResultRef  string `json:"result_ref" validate:"max=512,utf8,no_control"`
		ID         string `json:"id" validate:"max=64,utf8,no_control"`
	}{req.Resolution, req.By, req.Note, req.ResultRef, req.ID})
	if req.Final && req.Resolution != StateFailed {
		v.field("final", "resolution=failed", "final applies to a failed resolution only")
	}
	if req.Rerun && (req.Resolution != StateFailed || req.Final) {
		v.field("rerun", "resolution=failed,final=false", "a re-run applies to a retryable failed resolution only")
	}
	if strings.ContainsAny(req.ID, ", ") {
		v.field("id", "excludesall=, ", "a bulk id has no comma or space (the history reads \"bulk <id>, ...\")")
	}
	if err := v.err(); err != nil {
		return req, err
	}
	req.Note = redact.Redact(req.Note)
	if req.ID == "" {
		req.ID = NewBulkID()
	}
	return req, nil
}

// NewBulkID makes a short random name for a bulk action ("b-" and 8 hex
// digits): unique enough among the bulk actions of one installation, short
// enough to read out in an incident call.
func NewBulkID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return "b-" + hex.EncodeToString(b[:])
}

// BulkAction is what a bulk id names, kept by the store from the first run
// of the decision that writes (a dry run claims nothing): the hash of its
// content (BulkResolveRequest.Content), when it began, and the decision in
// the person's words for the audit (an action kept by an earlier release
// has none of them).
type BulkAction struct {
	ID         string
	Content    []byte
	At         time.Time
	By         string
	Note       string
	Resolution State
	Final      bool
	Rerun      bool // and re-ran the executions in n8n
}

// Content is the hash of what req (normalized) decides: its selection,
// resolution, person, reason and result reference. The order of the
// states and the time zone of the range do not change it.
func (req BulkResolveRequest) Content() []byte {
	f := req.Filter
	f.States = slices.Compact(slices.Sorted(slices.Values(f.States)))
	f.From, f.To = f.From.UTC(), f.To.UTC()
	b, err := json.Marshal(struct {
		Filter     Filter
		Resolution State
		Final      bool
		By, Note   string
		ResultRef  string
		Rerun      bool `json:",omitempty"` // omitted: the content of a bulk made before re-runs is unchanged
	}{f, req.Resolution, req.Final, req.By, req.Note, req.ResultRef, req.Rerun})
	if err != nil {
		panic("a bulk request always encodes: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return sum[:16]
}

// DecideBulkAction decides whether req (normalized, not a dry run) may run
// under its id; prev is the action the store keeps under it (nil: none).
// A new id is kept (next); the same content again is a repeat that
// finishes what is left (next nil, no error); other content under the same
// id is refused, since every key's history would name one action for two
// decisions.
func DecideBulkAction(prev *BulkAction, req BulkResolveRequest, now time.Time) (next *BulkAction, err error) {
	content := req.Content()
	switch {
	case prev == nil:
		return &BulkAction{ID: req.ID, Content: content, At: now, By: req.By, Note: req.Note, Resolution: req.Resolution, Final: req.Final, Rerun: req.Rerun}, nil
	case bytes.Equal(prev.Content, content):
		return nil, nil
	}
	return nil, &errs.Error{Code: errs.Conflict, Fields: []errs.FieldError{{Field: "id", Rule: "unique"}},
		Message: "bulk id " + req.ID + " names another decision (another selection, resolution, person, note or result reference): send this one without an id, and one is made, or with a new one; nothing changed"}
}

// ResolveOne is the single decision a bulk decision makes about one key.
func (req BulkResolveRequest) ResolveOne(ns, key string) ResolveRequest {
	return ResolveRequest{Namespace: ns, Key: key, Resolution: req.Resolution, By: req.By, Note: req.Note,
		ResultRef: req.ResultRef, Final: req.Final, Rerun: req.Rerun, Bulk: req.ID}
}

// DecideBulkResolve decides one key of a bulk decision (req normalized):
// DecideResolve decides it, so a bulk decision follows the state machine
// of a single one and writes the same record, history and event. skip
// names why the key is left as it is ("" when it is decided); a skipped
// key has an empty Step and no error. An error is a broken key or request,
// which stops the bulk decision.
func DecideBulkResolve(cur *Record, req BulkResolveRequest, np NamespacePolicy, now time.Time) (st Step, skip string, err error) {
	switch {
	case cur == nil || !req.Filter.Match(cur):
		return Step{}, SkipChanged, nil
	case DecidedByBulk(cur, req.ID):
		return Step{}, SkipDecided, nil
	case cur.State == StateCompleted:
		return Step{}, SkipCompleted, nil
	case ApprovalReason(cur.Reason) && cur.Reason != ReasonApproved:
		return Step{}, SkipAwaitingApproval, nil
	case cur.State == StateReserved && cur.LeaseExpiresAt != nil && now.Before(*cur.LeaseExpiresAt):
		return Step{}, SkipLiveLease, nil
	case ResolveParked(cur, false) != nil:
		// The one rule (resolve_parked.go): a bulk decision never leaves an
		// execution waiting in n8n; it does not force.
		return Step{}, SkipParkedWaiting, nil
	case req.Rerun && RerunHolder(cur) == "":
		if _, granted := RerunGranted(cur); granted {
			return Step{}, SkipDecided, nil
		}
		return Step{}, SkipNoRerunGate, nil
	}
	st, err = DecideResolve(cur, req.ResolveOne(cur.Namespace, cur.Key), np, now)
	switch {
	case errs.CodeOf(err) == errs.Conflict:
		return Step{}, SkipConflict, nil
	case err != nil:
		return Step{}, "", err
	case st.Result.Replayed:
		return Step{}, SkipDecided, nil
	}
	return st, "", nil
}

// DecidedByBulk reports whether the key's last change is bulk action id's
// resolution: a repeat of the same bulk action (a retried request, a
// double click) leaves it alone.
func DecidedByBulk(r *Record, id string) bool {
	last := lastTransition(r)
	if id == "" || last == nil {
		return false
	}
	return (last.Event == HistoryResolved || last.Event == HistoryRerunGranted) && strings.HasPrefix(last.Detail, "bulk "+id+", ")
}

// Count adds one key's outcome to the result.
func (res *BulkResult) Count(skip string) {
	if skip == "" {
		res.Decided++
		return
	}
	if res.Skipped == nil {
		res.Skipped = map[string]int{}
	}
	res.Skipped[skip]++
}

// ResolveMany implements BulkResolver. A run that writes first claims its
// id (DecideBulkAction). The whole selection is read first: a key a
// decision moves into another index is not met again, and Matched is the
// selection a person was shown. Then it is decided BulkBatch keys at a
// time, each batch one transaction of the store that locks its keys, so
// live writes wait for one batch at most. A dry run decides the same way
// without locks and writes nothing. When ctx ends between batches, the
// batches committed stay decided and the result says how many.
func (o *Operations) ResolveMany(ctx context.Context, req BulkResolveRequest) (BulkResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return BulkResult{}, err
	}
	if !req.DryRun {
		err := o.Driver.ClaimBulk(ctx, req.ID, func(prev *BulkAction, now time.Time) (*BulkAction, error) {
			return DecideBulkAction(prev, req, now)
		})
		if err != nil {
			return BulkResult{}, err
		}
	}
	res := BulkResult{ID: req.ID, DryRun: req.DryRun, Skipped: map[string]int{}}
	refs, err := o.selectRefs(ctx, req.Filter)
	if err != nil {
		return res, err
	}
	res.Matched = len(refs)
	for len(refs) > 0 {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		batch := refs[:min(BulkBatch, len(refs))]
		refs = refs[len(batch):]
		var part BulkResult
		err := o.Driver.DecideKeys(ctx, KeysOp{Name: "resolve-bulk", Keys: batch, DryRun: req.DryRun,
			Decide: func(got []Loaded, now time.Time) ([]Step, error) {
				part = BulkResult{}
				steps := make([]Step, len(got))
				for i, g := range got {
					if g.Damaged {
						part.Count(SkipDamaged)
						continue
					}
					st, skip, err := DecideBulkResolve(g.Record, req, o.Policies.Namespace(g.Namespace), now)
					if err != nil {
						return nil, err
					}
					steps[i] = st
					part.Count(skip)
				}
				return steps, nil
			}})
		if err != nil {
			return res, err
		}
		res.Decided += part.Decided
		for why, n := range part.Skipped {
			res.Skipped[why] += n
		}
	}
	return res, nil
}

// selectRefs reads every key f selects, page by page.
func (o *Operations) selectRefs(ctx context.Context, f Filter) ([]KeyRef, error) {
	var refs []KeyRef
	for cursor := ""; ; {
		page, err := o.Driver.Select(ctx, f, cursor, 1000)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Items {
			refs = append(refs, KeyRef{r.Namespace, r.Key})
		}
		if cursor = page.NextCursor; cursor == "" {
			return refs, nil
		}
	}
}
