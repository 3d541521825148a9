package keystore

import (
	"context"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// The operations on keys, written once for every store. Each one
// normalises its request, looks up the namespace's policy, says which
// breaker its decision reads, and hands the Decide* call to the store's
// Driver, which loads, locks and saves around it. A store embeds
// Operations, so its Reserve, Complete, … are these.

// BreakerRule says which destination's breaker a key decision reads.
type BreakerRule int

const (
	NoBreaker      BreakerRule = iota // the decision reads no breaker
	RequestBreaker                    // Op.Destination's (reserve: the request names it)
	RecordBreaker                     // the destination the key's record names (complete, fail, resume)
)

// Op is one decision on one key, for a Driver to carry out.
type Op struct {
	Name           string // says what the store did, in its errors and logs: "reserve", "complete", …
	Namespace, Key string // normalised
	Breaker        BreakerRule
	Destination    string // RequestBreaker: the destination ("" : no breaker)
	// ReadFirst: most answers change nothing (copies of an event), so the
	// store may decide in a read, without the write path's wait, and
	// decide again in the write only what writes.
	ReadFirst bool
	// Decide is the pure decision. A store may call it more than once (a
	// lost race, a read first); the last call's Step is the one saved.
	Decide func(cur *Record, br *Breaker, now time.Time) (Step, error)
}

// BreakerOf is the destination whose breaker op's decision reads, given
// the key's record (nil: absent); "" for none.
func (op Op) BreakerOf(cur *Record) string {
	switch op.Breaker {
	case RequestBreaker:
		return op.Destination
	case RecordBreaker:
		if cur != nil {
			return cur.Destination
		}
	}
	return ""
}

// BreakerOp is one decision on a destination's breaker alone (a person's
// maintenance window, its end, a reset).
type BreakerOp struct {
	Name        string
	Destination string // checked
	// Decide gets the breaker (NewBreaker when the destination has none
	// stored: exists is false). The store writes the Step's breaker and
	// events when they change anything.
	Decide func(br *Breaker, exists bool, now time.Time) (Step, error)
}

// KeyRef names one key.
type KeyRef struct{ Namespace, Key string }

// Loaded is one key of a KeysOp as its store read it.
type Loaded struct {
	KeyRef
	Record  *Record // nil: absent, or damaged
	Damaged bool    // its record cannot be read (the store has noted it); nothing is decided on it
}

// KeysOp is one decision on each key of a batch (a bulk decision's), for
// a Driver to carry out in one transaction.
type KeysOp struct {
	Name   string   // says what the store did, in its errors and logs
	Keys   []KeyRef // normalised; each at most once
	DryRun bool     // read without locks and save nothing
	// Decide gets the batch's keys in Keys' order and returns their steps
	// in the same order (an empty Step: nothing to save). A Step changes a
	// key's record and appends events, never a breaker. A store may call
	// it more than once (a lost race); the last call's steps are saved.
	Decide func(got []Loaded, now time.Time) ([]Step, error)
}

// Driver is what a store gives the operations: one decision on a key, on
// a breaker, on a batch of keys, on a bulk id and on what a sweep finds
// due, each made atomic with its write. A Driver never decides; it loads
// what the op names, calls its Decide with the time of the decision, and
// saves what was decided before it answers.
type Driver interface {
	Selector // what a bulk decision selects, through the store's indexes

	DecideKey(ctx context.Context, op Op) (Result, error)
	DecideBreaker(ctx context.Context, op BreakerOp) error
	// DecideKeys carries out op: the batch's records loaded and locked in
	// one transaction (a batch never holds a lock past its own
	// transaction), decided, saved. A damaged record is handed to Decide
	// as Damaged and never stops the rest of the batch.
	DecideKeys(ctx context.Context, op KeysOp) error
	// ClaimBulk loads the action kept under id (nil: none), calls decide
	// with it and keeps what decide returns (nil: nothing), atomically
	// against another claim of the same id; decide's error is the answer.
	ClaimBulk(ctx context.Context, id string, decide func(prev *BulkAction, now time.Time) (*BulkAction, error)) error
	// SweepDue carries out one batch of a sweep pass (sweep.go) in one
	// short transaction.
	SweepDue(ctx context.Context, op SweepOp) (SweepBatch, error)
	// FoldActivity writes the duplicate answers counted in memory
	// (Operations.Duplicates) into the activity chart and drops the hours
	// it no longer shows.
	FoldActivity(ctx context.Context) error
}

// Operations runs every key operation of Store over a Driver. A store
// embeds it and sets it up in its Open.
type Operations struct {
	Driver   Driver
	Policies Policies
	// Duplicates counts the duplicate_event answers of reserve, which
	// write nothing (the store adds the tally to its activity chart).
	Duplicates *DuplicateTally
}

// Reserve implements Store.
func (o *Operations) Reserve(ctx context.Context, req ReserveRequest) (Result, error) {
	req, fp, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	np := o.Policies.Namespace(req.Namespace)
	var at time.Time
	res, err := o.Driver.DecideKey(ctx, Op{Name: "reserve", Namespace: req.Namespace, Key: req.Key,
		Breaker: RequestBreaker, Destination: req.Destination, ReadFirst: true,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			at = now
			return DecideReserve(cur, br, req, fp, np, now)
		}})
	if err == nil && res.Outcome == OutcomeDuplicate && o.Duplicates != nil {
		o.Duplicates.Add(at, 1)
	}
	return res, err
}

// Complete implements Store.
func (o *Operations) Complete(ctx context.Context, req CompleteRequest) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	np := o.Policies.Namespace(req.Namespace)
	return o.Driver.DecideKey(ctx, Op{Name: "complete", Namespace: req.Namespace, Key: req.Key, Breaker: RecordBreaker,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			return DecideComplete(cur, br, req, np, now)
		}})
}

// Fail implements Store.
func (o *Operations) Fail(ctx context.Context, req FailRequest) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	np := o.Policies.Namespace(req.Namespace)
	return o.Driver.DecideKey(ctx, Op{Name: "fail", Namespace: req.Namespace, Key: req.Key, Breaker: RecordBreaker,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			return DecideFail(cur, br, req, np, o.Policies.BreakerPolicy(br), now)
		}})
}

// Resolve implements Store.
func (o *Operations) Resolve(ctx context.Context, req ResolveRequest) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	np := o.Policies.Namespace(req.Namespace)
	return o.Driver.DecideKey(ctx, Op{Name: "resolve", Namespace: req.Namespace, Key: req.Key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			return DecideResolve(cur, req, np, now)
		}})
}

// Acknowledge implements AckStore.
func (o *Operations) Acknowledge(ctx context.Context, req AckRequest) (Result, error) {
	req, err := req.Normalize()
	if err != nil {
		return Result{}, err
	}
	return o.Driver.DecideKey(ctx, Op{Name: "acknowledge", Namespace: req.Namespace, Key: req.Key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			return DecideAcknowledge(cur, req, now)
		}})
}

// Approve implements ApprovalStore.
func (o *Operations) Approve(ctx context.Context, req ApprovalRequest) (Result, error) {
	return o.approval(ctx, "approve", req, false, DecideApprove)
}

// Reject implements ApprovalStore.
func (o *Operations) Reject(ctx context.Context, req ApprovalRequest) (Result, error) {
	return o.approval(ctx, "reject", req, true, DecideReject)
}

func (o *Operations) approval(ctx context.Context, name string, req ApprovalRequest, reject bool,
	decide func(*Record, ApprovalRequest, NamespacePolicy, time.Time) (Step, error)) (Result, error) {
	req, err := req.Normalize(reject)
	if err != nil {
		return Result{}, err
	}
	np := o.Policies.Namespace(req.Namespace)
	return o.Driver.DecideKey(ctx, Op{Name: name, Namespace: req.Namespace, Key: req.Key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			return decide(cur, req, np, now)
		}})
}

// ClaimResume implements ParkStore.
func (o *Operations) ClaimResume(ctx context.Context, ns, key string, claim time.Duration) (*Record, bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return nil, false, err
	}
	np := o.Policies.Namespace(ns)
	claimed := false
	res, err := o.Driver.DecideKey(ctx, Op{Name: "claim resume", Namespace: ns, Key: key, Breaker: RecordBreaker,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			st, ok := DecideClaimResume(cur, br, claim, np, now)
			claimed = ok // a step may be written unclaimed (a namespace the destination refuses: lost)
			return st, nil
		}})
	if err != nil || !claimed || res.Record == nil {
		return nil, false, err
	}
	return res.Record, true, nil
}

// ResumeAnswered implements ParkStore.
func (o *Operations) ResumeAnswered(ctx context.Context, ns, key string, parkedAt time.Time, answer ResumeAnswer, detail string) (*Record, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return nil, err
	}
	lease := o.Policies.Namespace(ns).Lease
	res, err := o.Driver.DecideKey(ctx, Op{Name: "resume answered", Namespace: ns, Key: key, Breaker: RecordBreaker,
		Decide: func(cur *Record, br *Breaker, now time.Time) (Step, error) {
			st, _ := DecideResumeAnswered(cur, br, parkedAt, answer, detail, now)
			return WokenProbeHold(st, cur, br, lease, now), nil
		}})
	return res.Record, err
}

// ParkedOverdue implements ParkStore.
func (o *Operations) ParkedOverdue(ctx context.Context, ns, key string, parkedAt time.Time, limit time.Duration) (bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return false, err
	}
	reported := false
	_, err = o.Driver.DecideKey(ctx, Op{Name: "parked overdue", Namespace: ns, Key: key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			st, ok := DecideParkedOverdue(cur, parkedAt, limit, now)
			reported = ok
			return st, nil
		}})
	return reported && err == nil, err
}

// ClaimCheck implements CheckStore.
func (o *Operations) ClaimCheck(ctx context.Context, ns, key string, attempt int, claim time.Duration, maxClaims int) (*Record, CheckClaim, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return nil, CheckRefused, err
	}
	var got CheckClaim
	res, err := o.Driver.DecideKey(ctx, Op{Name: "claim check", Namespace: ns, Key: key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			st, c := DecideClaimCheck(cur, attempt, claim, maxClaims, now)
			got = c
			return st, nil
		}})
	if err != nil {
		return nil, CheckRefused, err
	}
	return res.Record, got, nil
}

// CheckAnswered implements CheckStore.
func (o *Operations) CheckAnswered(ctx context.Context, ns, key string, attempt int, a CheckAnswer) (*Record, bool, error) {
	key, err := CheckIdentity(ns, key)
	if err != nil {
		return nil, false, err
	}
	np := o.Policies.Namespace(ns)
	var ok bool
	res, err := o.Driver.DecideKey(ctx, Op{Name: "check answered", Namespace: ns, Key: key,
		Decide: func(cur *Record, _ *Breaker, now time.Time) (Step, error) {
			st, took := DecideCheckAnswered(cur, attempt, a, np, now)
			ok = took
			return st, nil
		}})
	return res.Record, ok, err
}

// HoldDestination implements ParkStore.
func (o *Operations) HoldDestination(ctx context.Context, dest, by, reason string, until time.Time) (Breaker, error) {
	return o.breaker(ctx, "hold destination", dest, func(br *Breaker, _ bool, now time.Time) (Step, error) {
		return DecideHoldDestination(br, by, reason, until, now)
	})
}

// EndHold implements ParkStore.
func (o *Operations) EndHold(ctx context.Context, dest, by, reason string) (Breaker, error) {
	return o.breaker(ctx, "end hold", dest, func(br *Breaker, exists bool, now time.Time) (Step, error) {
		if !exists {
			return Step{}, errs.Errorf(errs.NotFound, "destination %q has no breaker", dest)
		}
		return DecideEndHold(br, by, reason, now)
	})
}

// ResetBreaker implements Store.
func (o *Operations) ResetBreaker(ctx context.Context, dest, by, reason string) (Breaker, error) {
	return o.breaker(ctx, "reset breaker", dest, func(br *Breaker, exists bool, now time.Time) (Step, error) {
		return DecideResetBreaker(br, exists, by, reason, now)
	})
}

// breaker runs a decision on dest's breaker and answers the breaker it
// leaves, as seen at the decision's time.
func (o *Operations) breaker(ctx context.Context, name, dest string, decide func(*Breaker, bool, time.Time) (Step, error)) (Breaker, error) {
	if err := CheckNamespace("destination", dest); err != nil {
		return Breaker{}, err
	}
	var out Breaker
	err := o.Driver.DecideBreaker(ctx, BreakerOp{Name: name, Destination: dest,
		Decide: func(br *Breaker, exists bool, now time.Time) (Step, error) {
			st, err := decide(br, exists, now)
			if err == nil {
				out = st.Breaker.View(now)
			}
			return st, err
		}})
	if err != nil {
		return Breaker{}, err
	}
	return out, nil
}
