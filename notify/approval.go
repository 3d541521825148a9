package notify

import (
	"context"
	"fmt"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Approval before writing (keystore/approval.go): each new event of a
// namespace that requires approval makes one message to the namespace's
// approvers with Approve and Reject buttons. Reject opens a form for the
// reason (a Slack modal). The decision goes to the keystore, which writes
// who, when and why in the key's history; the message then shows it and
// its escalation stops. Unanswered, it escalates like any message of the
// namespace. A replayed or late click changes nothing and says so.

// KindApproval: a key waits for a person's approval.
const KindApproval Kind = "approval"

// Decisions of an approval message.
const (
	DecisionApproved = "approved"
	DecisionRejected = "rejected"
)

// Actions of an approval message's buttons, and of the reason form that
// Reject opens.
const (
	ActionApprove      = "guard_approve"
	ActionReject       = "guard_reject"
	ActionRejectReason = "guard_reject_reason"
)

// approvalRoute is the namespace's route with its approvers as the ones
// who hear and decide.
func (c Config) approvalRoute(ns string) route {
	rt := c.forRoute(c.Namespaces, ns)
	if a := c.Namespaces[ns].Approvers; len(a) > 0 {
		rt.Owner, rt.Resolvers = a[0], a
	}
	return rt
}

// approvalRequest is the message of one key awaiting approval: never
// grouped (each is its own decision).
func (s *Service) approvalRequest(ev keystore.Event, rec *Record, at time.Time) Addition {
	rt := s.cfg.approvalRoute(ev.Namespace)
	rec.Owner, rec.Channel, rec.Runbook = rt.Owner, rt.Channel, rt.Runbook
	rec.KeyPayload = KeyPayload{Namespace: ev.Namespace, Key: Truncate(ev.Key, 255), Holder: clean(ev.Owner, 128),
		Summary: clean(ev.Summary, keystore.MaxSummaryLength)}
	rec.Destination = ev.Destination
	rec.Message = cleanIdentity(ev.Message, 128) // who requested it, unredacted: the approver must see who asked
	rec.EscalateAt = firstEscalation(rt, at)
	rec.Group = groupOf(string(KindApproval), ev.Namespace, ev.Key)
	return Addition{Record: rec, Once: fmt.Sprintf("%s\x00%s\x00%s", ev.Kind, ev.Namespace, ev.Key)}
}

// approvalDecidedElsewhere records on cur that its key was approved or
// rejected (by, at) without its buttons, or after a click whose own record
// came first: escalation stops, the buttons go. A decision already shown
// stays.
func approvalDecidedElsewhere(cur *Record, decision, by string, at, now time.Time) *Record {
	x := cur.clone()
	x.EscalateAt = nil
	if x.Decision == DecisionApproved || x.Decision == DecisionRejected {
		return x
	}
	x.Decision, x.DecidedBy, x.DecidedByName, x.DecidedAt, x.SnoozedUntil = decision, "", cmpOr(by, "someone outside Slack"), &at, nil
	x.Version++
	if x.Status == StatusDelivered && x.SlackTS != "" {
		x.DueAt = now
	}
	return x
}

// approvalDecided updates the messages about a key whose approval was
// decided (in Slack, the API or the console).
func (s *Service) approvalDecided(ctx context.Context, ev keystore.Event) error {
	about, err := s.outbox.AboutKey(ctx, ev.Namespace, ev.Key, 10)
	if err != nil {
		return err
	}
	decision := DecisionApproved
	if ev.Message == "rejected" {
		decision = DecisionRejected
	}
	for _, r := range about {
		if r.Kind != KindApproval {
			continue
		}
		now := s.now()
		next := func(x *Record) *Record { return approvalDecidedElsewhere(x, decision, ev.Owner, ev.At, now) }
		updated, err := s.outbox.Update(ctx, r.ID, func(x *Record) { *x = *next(x) })
		if err != nil {
			s.log.Warn("recording an approval decided elsewhere failed", "id", r.ID, "err", err)
			continue
		}
		if updated != nil {
			s.updateEscalations(ctx, updated, next)
		}
	}
	s.poke()
	return nil
}
