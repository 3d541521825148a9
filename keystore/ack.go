package keystore

import (
	"context"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Acknowledgements: a person said (in Slack, "Leave it to me", or a
// snooze of the reminder) that they take a key on. Nothing about the key
// changes — not its state, not its last change (UpdatedAt: searches and
// retention do not see it) — only its history says who and when, so the
// console shows it beside the decisions.
//
//	acknowledge: any state, the attempt the person saw -> history + acknowledged|snoozed
//	             another attempt                         -> conflict, nothing written
//	             absent                                  -> not found

// History events of acknowledgements.
const (
	HistoryAcknowledged HistoryEvent = "acknowledged"
	HistorySnoozed      HistoryEvent = "snoozed"
)

// AckRequest is one acknowledgement of a key.
type AckRequest struct {
	Namespace string `json:"namespace" validate:"namespace"`
	Key       string `json:"key"` // NormalizeKey
	// Attempt is the attempt the person saw (0: whatever is current).
	Attempt int          `json:"attempt" validate:"min=0"`
	Event   HistoryEvent `json:"event" validate:"oneof=acknowledged snoozed"`
	By      string       `json:"by" validate:"required,max=128,utf8,no_control,no_format"` // trimmed first
	Detail  string       `json:"detail" validate:"max=2000,utf8"`
}

// Normalize checks the request and trims its text.
func (r AckRequest) Normalize() (AckRequest, error) {
	var v violations
	r.Key = v.key(r.Key)
	r.By, r.Detail = strings.TrimSpace(r.By), strings.TrimSpace(r.Detail)
	v.check(r)
	return r, v.err()
}

// DecideAcknowledge appends the acknowledgement to the key's history; it
// never changes anything else.
func DecideAcknowledge(cur *Record, req AckRequest, now time.Time) (Step, error) {
	if cur == nil {
		return Step{}, errs.Errorf(errs.NotFound, "no key %s in namespace %s", req.Key, req.Namespace)
	}
	if req.Attempt != 0 && req.Attempt != cur.Attempt {
		return Step{}, errs.Errorf(errs.Conflict, "key %s is at attempt %d now, not %d: the acknowledgement was for an attempt that is over",
			req.Key, cur.Attempt, req.Attempt)
	}
	// The same person saying the same again about this attempt (a second
	// snooze) adds nothing: the history keeps how the key got here.
	acks := 0
	for _, t := range cur.History {
		if acknowledgement(t.Event) {
			acks++
			if t.Event == req.Event && t.By == req.By && t.Attempt == cur.Attempt {
				return Step{Result: Result{Outcome: OutcomeFound, Replayed: true, Record: cur}}, nil
			}
		}
	}
	next := cur.Clone()
	if acks >= MaxAcks {
		// Acknowledgements never push the key's transitions out: the
		// oldest acknowledgement makes room.
		for i, t := range next.History {
			if acknowledgement(t.Event) {
				next.History = append(next.History[:i:i], next.History[i+1:]...)
				break
			}
		}
	}
	next.addHistory(Transition{At: now, Event: req.Event, Attempt: cur.Attempt, By: req.By, Detail: truncate(req.Detail, 200)})
	return Step{Record: next, Result: Result{Outcome: OutcomeFound, Record: next}}, nil
}

// MaxAcks bounds the acknowledgements kept in a key's history.
const MaxAcks = 4

func acknowledgement(e HistoryEvent) bool { return e == HistoryAcknowledged || e == HistorySnoozed }

// AckStore is the part of Store that acknowledging uses; storetest
// checks it on every store.
type AckStore interface {
	// Acknowledge applies DecideAcknowledge.
	Acknowledge(ctx context.Context, req AckRequest) (Result, error)
}
