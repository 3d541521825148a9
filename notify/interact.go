package notify

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The buttons of a message (their action_id); the value is the
// notification ID.
const (
	ActionComplete = "guard_complete" // unknown key: it happened
	ActionRetry    = "guard_retry"    // unknown key: it did not happen
	ActionAck      = "guard_ack"      // leave it to me / acknowledge
	ActionSnooze   = "guard_snooze"   // failure: remind in SnoozeFor
	ActionRerun    = "guard_rerun"    // failure: retry the execution in n8n
)

// SnoozeFor is how long "Snooze 1 h" holds escalation back.
const SnoozeFor = time.Hour

// Keys is the part of the keystore a decision goes through
// (keystore.Store satisfies it).
type Keys interface {
	Lookup(ctx context.Context, namespace, key string) (keystore.Result, error)
	Resolve(ctx context.Context, req keystore.ResolveRequest) (keystore.Result, error)
}

// Click is one button press, from the HTTP endpoint or Socket Mode.
type Click struct {
	Action         string
	NotificationID string
	UserID         string // U…
	UserName       string
	Channel        string // where the message is, for an ephemeral answer
}

// act carries out a click: it checks that the person may decide, records
// the decision (on the key through Keys.Resolve, and on the notification),
// and schedules the in-place update of every message about it. Anything
// refused is answered to that person alone and changes nothing.
func (s *Service) act(ctx context.Context, c Click) {
	id := c.NotificationID
	if r, err := s.outbox.Get(ctx, id); err == nil && r != nil && r.Kind == KindEscalation {
		id = r.EscalationOf // its buttons act on the notification it escalates
	}
	// Two clicks about one notification decide one after the other (the
	// second sees the first's decision); clicks about others go on.
	defer s.clickLocks.lock(id)()
	target, err := s.outbox.Get(ctx, id)
	if err != nil || target == nil {
		s.log.Warn("a Slack button names no notification this guard knows", "id", c.NotificationID, "err", err)
		s.ephemeral(ctx, c, "n8n-guard does not know this message any more (it may have been purged); nothing changed.")
		return
	}
	ok, err := s.mayDecide(ctx, target, c.UserID)
	if err != nil {
		s.log.Warn("could not check who may decide", "id", target.ID, "err", err)
		s.ephemeral(ctx, c, "n8n-guard could not check whether you may decide this (Slack did not answer); nothing changed. Try again in a minute.")
		return
	}
	if !ok {
		s.log.Info("a Slack user not allowed to decide pressed a button", "id", target.ID, "user", c.UserID, "action", c.Action)
		s.ephemeral(ctx, c, "Not allowed — ask "+s.mentionOf(ctx, target.Owner)+
			". Only the owner, the resolvers and the escalation steps in the n8n-guard config decide this; nothing changed.")
		return
	}
	now := s.now()
	decision, retriedAs := "", ""
	switch c.Action {
	case ActionRerun:
		id, msg, ok := s.retryExecution(ctx, target)
		if !ok {
			s.ephemeral(ctx, c, msg)
			return
		}
		decision, retriedAs = DecisionRetried, id
	case ActionComplete, ActionRetry:
		if target.Kind != KindKeyUnknown {
			s.ephemeral(ctx, c, "This message is not about a key; nothing changed.")
			return
		}
		if msg, done := s.resolveKey(ctx, target, c); !done {
			s.ephemeral(ctx, c, msg)
			return
		}
		decision = map[string]string{ActionComplete: DecisionCompleted, ActionRetry: DecisionRetry}[c.Action]
	case ActionAck:
		if target.acknowledged() {
			s.ephemeral(ctx, c, fmt.Sprintf("Already taken: %s. Nothing changed.", decisionText(target)))
			return
		}
		decision = DecisionAcknowledged
	case ActionSnooze:
		if target.acknowledged() {
			s.ephemeral(ctx, c, fmt.Sprintf("Already taken: %s. Nothing changed.", decisionText(target)))
			return
		}
		decision = DecisionSnoozed
	default:
		s.ephemeral(ctx, c, "n8n-guard does not know this button; nothing changed.")
		return
	}
	decide := func(x *record) {
		t := now
		x.Decision, x.DecidedBy, x.DecidedByName, x.DecidedAt, x.SnoozedUntil, x.RetriedAs = decision, c.UserID, "", &t, nil, retriedAs
		if decision == DecisionSnoozed {
			until := now.Add(SnoozeFor)
			x.SnoozedUntil = &until
		}
		if x.Status == StatusDelivered && x.SlackTS != "" {
			x.DueAt = now // chat.update shows the decision in place
		}
	}
	updated, err := s.outbox.Update(ctx, target.ID, func(x *record) {
		decide(x)
		x.EscalateAt = nil
		if decision == DecisionSnoozed {
			until := now.Add(SnoozeFor)
			x.EscalateAt = &until
		}
	})
	if err == nil && updated == nil {
		err = errors.New("the notification is gone")
	}
	if err != nil {
		s.log.Error("recording a decision from Slack failed", "id", target.ID, "err", err)
		s.ephemeral(ctx, c, "n8n-guard could not record your decision on the notification (its store failed); try again.")
		return
	}
	for _, id := range updated.Escalations {
		if _, err := s.outbox.Update(ctx, id, decide); err != nil {
			s.log.Warn("updating an escalation message failed", "id", id, "err", err)
		}
	}
	s.m.decisions.WithLabelValues(decision).Inc()
	s.log.Info("decision from Slack", "id", target.ID, "kind", target.Kind, "decision", decision, "user", c.UserID,
		"namespace", target.Namespace, "key", target.Key)
	s.poke()
}

// resolveKey records the decision on the key. It returns the answer for
// the person and false when nothing changed.
func (s *Service) resolveKey(ctx context.Context, r *record, c Click) (string, bool) {
	if s.opts.Keys == nil {
		return "This n8n-guard cannot resolve keys from Slack (no store is wired to notifications); nothing changed.", false
	}
	cur, err := s.opts.Keys.Lookup(ctx, r.Namespace, r.Key)
	if err != nil {
		s.log.Warn("looking up a key for a Slack decision failed", "namespace", r.Namespace, "key", r.Key, "err", err)
		return "n8n-guard could not read the key (its store failed); nothing changed. Try again.", false
	}
	if cur.Record == nil {
		return fmt.Sprintf("Key `%s` is not in the store any more (purged); nothing changed.", escapeMrkdwn(r.Key)), false
	}
	if cur.Record.State != keystore.StateUnknown {
		s.resolvedElsewhere(ctx, r, cur.Record, s.now())
		return alreadyResolved(cur.Record), false
	}
	res := keystore.StateCompleted
	note := "Decided in Slack: it happened — marked completed."
	if c.Action == ActionRetry {
		res, note = keystore.StateFailed, "Decided in Slack: it did not happen — a retry is allowed."
	}
	by := fmt.Sprintf("%s (Slack %s)", cmpOr(c.UserName, "Slack user"), c.UserID)
	_, err = s.opts.Keys.Resolve(ctx, keystore.ResolveRequest{
		Namespace: r.Namespace, Key: r.Key, Resolution: res, By: truncate(by, keystore.MaxByLength), Note: note,
	})
	var ke *errs.Error
	switch {
	case errors.As(err, &ke) && ke.Code == errs.Conflict:
		if again, lerr := s.opts.Keys.Lookup(ctx, r.Namespace, r.Key); lerr == nil && again.Record != nil && again.Record.State != keystore.StateUnknown {
			s.resolvedElsewhere(ctx, r, again.Record, s.now())
			return alreadyResolved(again.Record), false
		}
		return "The key could not be resolved: " + escapeMrkdwn(ke.Message) + ". Nothing changed.", false
	case err != nil:
		s.log.Warn("resolving a key from Slack failed", "namespace", r.Namespace, "key", r.Key, "err", err)
		return "n8n-guard could not resolve the key (" + escapeMrkdwn(errs.MessageOf(err)) + "); nothing changed.", false
	}
	return "", true
}

func alreadyResolved(rec *keystore.Record) string {
	if rec.ResolvedBy != "" && rec.ResolvedAt != nil {
		return fmt.Sprintf("Already resolved: %s decided `%s` at %s. Nothing changed.",
			escapeMrkdwn(rec.ResolvedBy), rec.State, clock(*rec.ResolvedAt))
	}
	return fmt.Sprintf("The key is `%s` now, no longer unknown. Nothing changed.", rec.State)
}

// mayDecide: the owner, the rule's resolvers and the people the message
// escalates to (a user, or a member of a group). An owner given as e-mail
// counts once Slack resolved it.
func (s *Service) mayDecide(ctx context.Context, r *record, userID string) (bool, error) {
	if userID == "" {
		return false, nil
	}
	rt := s.cfg.routeFor(r)
	who := append([]string{r.Owner}, rt.Resolvers...)
	for _, st := range rt.Escalation {
		who = append(who, st.To)
	}
	var groups []string
	for _, w := range who {
		switch {
		case w == userID:
			return true, nil
		case groupIDRE.MatchString(w):
			groups = append(groups, w)
		case ownerEmailRE.MatchString(w):
			if id, ok, _ := s.outbox.SlackUser(ctx, w); ok && id == userID {
				return true, nil
			}
		}
	}
	if len(groups) > 0 && s.slack == nil {
		return false, errors.New("user groups cannot be checked without SLACK_BOT_TOKEN")
	}
	for _, g := range slices.Compact(groups) {
		var members []string
		c, _, err := s.call(ctx, "usergroups.users.list", func() error {
			var err error
			members, err = s.slack.GetUserGroupMembersContext(ctx, g)
			return err
		})
		if c != classOK && c != classPermanent {
			return false, err
		}
		if slices.Contains(members, userID) {
			return true, nil
		}
	}
	return false, nil
}

// mentionOf is the owner as Slack shows it, without calling Slack.
func (s *Service) mentionOf(ctx context.Context, owner string) string {
	switch {
	case userIDRE.MatchString(owner):
		return "<@" + owner + ">"
	case groupIDRE.MatchString(owner):
		return "<!subteam^" + owner + ">"
	case owner == "":
		return "the n8n-guard operator (no owner is configured)"
	}
	if id, ok, _ := s.outbox.SlackUser(ctx, owner); ok {
		return "<@" + id + ">"
	}
	return escapeMrkdwn(owner)
}

// ephemeral answers the person who clicked, visible to them alone.
func (s *Service) ephemeral(ctx context.Context, c Click, text string) {
	if s.slack == nil || c.Channel == "" || c.UserID == "" {
		return
	}
	cl, _, err := s.call(ctx, "chat.postEphemeral", func() error {
		_, err := s.slack.PostEphemeralContext(ctx, c.Channel, c.UserID, slack.MsgOptionText(text, false))
		return err
	})
	if cl != classOK {
		s.log.Warn("could not answer a Slack user", "user", c.UserID, "reason", slackReason(err))
	}
}

// decisionText says who did what, when, in mrkdwn.
func decisionText(r *record) string {
	who := "<@" + r.DecidedBy + ">"
	if r.DecidedBy == "" {
		who = escapeMrkdwn(r.DecidedByName)
	}
	at := ""
	if r.DecidedAt != nil {
		at = " at " + clock(*r.DecidedAt)
	}
	switch r.Decision {
	case DecisionCompleted:
		return who + " marked it *completed* (it happened)" + at
	case DecisionRetry:
		return who + " *allowed a retry* (it did not happen)" + at
	case DecisionAcknowledged:
		return who + " *acknowledged* it" + at + " and is on it"
	case DecisionRetried:
		return who + " *retried the execution* in n8n" + at + " (new execution " + escapeMrkdwn(r.RetriedAs) + ")"
	case DecisionSnoozed:
		until := ""
		if r.SnoozedUntil != nil {
			until = " until " + clock(*r.SnoozedUntil)
		}
		return who + " *snoozed* it" + until + at
	}
	return ""
}

func cmpOr(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return a
	}
	return b
}

// keyLocks is one mutex per notification ID, kept while someone holds or
// waits for it.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int
}

// lock takes id's mutex and returns its release.
func (k *keyLocks) lock(id string) func() {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLock{}
	}
	l := k.m[id]
	if l == nil {
		l = &keyLock{}
		k.m[id] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, id)
		}
		k.mu.Unlock()
	}
}
