package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"
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

// ReasonForm is what the Reject button's modal carries back: the button's
// value and where the message is (for answers to the person).
type ReasonForm struct {
	Value   string `json:"v"`
	Channel string `json:"c,omitempty"`
}

func approvalAction(a string) bool {
	return a == ActionApprove || a == ActionReject || a == ActionRejectReason
}

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

// actApproval carries out Approve, Reject (which opens the reason form)
// and the form's submission.
func (s *Service) actApproval(ctx context.Context, target *Record, c Click) {
	if target.Kind != KindApproval {
		s.ephemeral(ctx, c, "This message is not an approval request; nothing changed.")
		return
	}
	keys := s.opts.Keys
	if keys == nil {
		s.ephemeral(ctx, c, "This n8n-guard cannot decide approvals from Slack (no store is wired to notifications); nothing changed.")
		return
	}
	if c.Action == ActionReject {
		s.askReason(ctx, target, c)
		return
	}
	by := c.by()
	req := keystore.ApprovalRequest{Namespace: target.Namespace, Key: target.Key, By: by,
		// The user ID is Slack's word; the name is whatever the user chose.
		Identities: []string{c.UserID}, Claimed: []string{c.UserName}}
	decide, decision := keys.Approve, DecisionApproved
	if c.Action == ActionRejectReason {
		decide, decision, req.Note = keys.Reject, DecisionRejected, strings.TrimSpace(c.Note)
		if req.Note == "" {
			s.ephemeral(ctx, c, "A rejection needs its reason; nothing changed.")
			return
		}
	}
	res, err := decide(ctx, req)
	var ke *errs.Error
	switch {
	case errors.As(err, &ke) && (ke.Code == errs.Conflict || ke.Code == errs.Forbidden || ke.Code == errs.NotFound):
		s.m.refusedClicks.Inc()
		s.ephemeral(ctx, c, mrkdwn.Escape(ke.Message)+".")
		return
	case err != nil:
		s.log.Warn("deciding an approval from Slack failed", "namespace", target.Namespace, "key", target.Key, "err", err)
		s.ephemeral(ctx, c, "n8n-guard could not record your decision ("+mrkdwn.Escape(errs.MessageOf(err))+"); nothing changed. Try again.")
		return
	case res.Replayed:
		// A replayed or late click: the key was decided before.
		s.m.refusedClicks.Inc()
		who, at := "someone", ""
		if res.Record != nil {
			who = cmpOr(res.Record.ResolvedBy, who)
			if res.Record.ResolvedAt != nil {
				at = " at " + Clock(*res.Record.ResolvedAt)
			}
		}
		s.ephemeral(ctx, c, fmt.Sprintf("Already %s by %s%s. Nothing changed.", decision, mrkdwn.Escape(who), at))
		return
	}
	if err := s.record(ctx, target.ID, decision, c.UserID, ""); err != nil {
		s.log.Error("recording an approval from Slack on its message failed", "id", target.ID, "err", err)
	}
	s.m.decisions.WithLabelValues(decision).Inc()
	s.log.Info("approval decided in Slack", "id", target.ID, "decision", decision, "user", c.UserID,
		"namespace", target.Namespace, "key", target.Key)
	s.poke()
}

// askReason opens the form that asks for a rejection's reason; nothing
// is decided until it is sent.
func (s *Service) askReason(ctx context.Context, target *Record, c Click) {
	if target.Decision == DecisionApproved || target.Decision == DecisionRejected {
		s.m.refusedClicks.Inc()
		s.ephemeral(ctx, c, "Already decided: "+DecisionText(target)+". Nothing changed.")
		return
	}
	if s.slack == nil || c.TriggerID == "" {
		s.ephemeral(ctx, c, "Give the reason in the console or with POST /v1/reject; nothing changed.")
		return
	}
	meta, _ := json.Marshal(ReasonForm{Value: c.Value, Channel: c.Channel})
	cl, _, err := s.call(ctx, "views.open", func() error {
		return s.slack.AskReason(ctx, c.TriggerID, string(meta), "Reject "+Truncate(target.Key, 40))
	})
	if cl != classOK {
		s.log.Warn("could not open the reason form of a rejection", "user", c.UserID, "reason", slackReason(err))
		s.ephemeral(ctx, c, "Slack did not open the form for the reason; nothing changed. Try again, or reject in the console.")
	}
}
