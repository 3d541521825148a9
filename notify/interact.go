package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"
)

// Click is one button press, from Slack's interactivity (HTTP or Socket
// Mode; the slack package checks and decodes it).
type Click struct {
	Action string
	// Value is the button's value (ButtonValue: the notification, the key
	// attempt and the version it was rendered for).
	Value    string
	UserID   string // U…
	UserName string
	Channel  string // where the message is, for an ephemeral answer
	// TriggerID lets the guard open a modal in answer (Reject asks for
	// the reason); Note is what such a modal's form sent.
	TriggerID string
	Note      string
}

// by names the person who clicked in a key's history.
func (c Click) by() string {
	return Truncate(fmt.Sprintf("%s (Slack %s)", cmpOr(c.UserName, "Slack user"), c.UserID), keystore.MaxByLength)
}

// replayWindow is Slack's: a request older than this is refused, and one
// seen within it is a replay.
const replayWindow = 5 * time.Minute

// FirstUse records a signed request's identity (mark) in the outbox and
// reports whether it is the first time: a request within Slack's window,
// before or after it, is used once, across restarts and replicas.
func (s *Service) FirstUse(ctx context.Context, mark string) (bool, error) {
	now := s.now()
	// Slack accepts a timestamp up to replayWindow away either way: a
	// signature stays valid for twice the window.
	return s.outbox.FirstUse(ctx, mark, now, now.Add(2*replayWindow))
}

// Refused counts an interactivity request refused as unsigned, wrongly
// signed, replayed or stale.
func (s *Service) Refused() { s.m.refused.Inc() }

// Dispatch carries out clicks, each on a goroutine that outlives the
// request (Close waits for it).
func (s *Service) Dispatch(clicks ...Click) {
	for _, c := range clicks {
		s.clicks.Add(1)
		go func() {
			defer s.clicks.Done()
			defer func() {
				// A click must not take the guard (and its API) down.
				if p := recover(); p != nil {
					s.log.Error("panic while carrying out a Slack click", "panic", p, "action", c.Action, "value", c.Value,
						"stack", string(debug.Stack()))
				}
			}()
			ctx, cancel := context.WithTimeout(s.life, s.opts.ClickTimeout)
			defer cancel()
			s.act(ctx, c)
		}()
	}
}

// act carries out a click: it finds the notification the buttons act on,
// checks that the person may decide, lets decideClick decide, carries out
// the side effect (the key's resolution, the execution's retry) and
// records the decision. Anything refused is answered to that person alone
// and changes nothing.
func (s *Service) act(ctx context.Context, c Click) {
	id, attempt, version := parseButtonValue(c.Value)
	id = s.targetOf(ctx, id)
	// Two clicks about one notification decide one after the other (the
	// second sees the first's decision); clicks about others go on.
	defer s.clickLocks.lock(id)()
	target, refusal := s.authorize(ctx, id, c)
	if refusal != "" {
		s.ephemeral(ctx, c, refusal)
		return
	}
	if approvalAction(c.Action) {
		s.actApproval(ctx, target, c) // approval.go
		return
	}
	if target.IsKeyGroup() && (c.Action == ActionComplete || c.Action == ActionRetry) {
		s.actGroup(ctx, target, c, version) // groupclick.go
		return
	}
	step := decideClick(target, c.Action, s.opts.Executions != nil)
	if step.Refusal != "" {
		s.ephemeral(ctx, c, step.Refusal)
		return
	}
	retriedAs, refusal := s.carryOut(ctx, target, c, step.Decision, attempt, version)
	if refusal != "" {
		s.ephemeral(ctx, c, refusal)
		return
	}
	if err := s.record(ctx, target.ID, step.Decision, c.UserID, retriedAs); err != nil {
		s.log.Error("recording a decision from Slack failed", "id", target.ID, "err", err)
		s.ephemeral(ctx, c, "n8n-guard could not record your decision on the notification (its store failed); try again.")
		return
	}
	s.ackKeys(ctx, target, step.Decision, c)           // ackkeys.go
	s.auditFailure(ctx, target, step.Decision, c.by()) // failaudit.go
	s.m.decisions.WithLabelValues(step.Decision).Inc()
	s.log.Info("decision from Slack", "id", target.ID, "kind", target.Kind, "decision", step.Decision, "user", c.UserID,
		"namespace", target.Namespace, "key", target.Key)
	s.poke()
}

// targetOf is the notification a button acts on: an escalation's buttons
// act on the notification it escalates.
func (s *Service) targetOf(ctx context.Context, id string) string {
	if r, err := s.outbox.Get(ctx, id); err == nil && r != nil && r.Kind == KindEscalation {
		return r.EscalationOf
	}
	return id
}

// authorize loads the target and checks that the person may decide it.
func (s *Service) authorize(ctx context.Context, id string, c Click) (*Record, string) {
	target, err := s.outbox.Get(ctx, id)
	if err != nil || target == nil {
		s.log.Warn("a Slack button names no notification this guard knows", "id", id, "err", err)
		return nil, "n8n-guard does not know this message any more (it may have been purged); nothing changed."
	}
	ok, err := s.mayDecide(ctx, target, c.UserID)
	if err != nil {
		s.log.Warn("could not check who may decide", "id", target.ID, "err", err)
		return nil, "n8n-guard could not check whether you may decide this (Slack did not answer); nothing changed. Try again in a minute."
	}
	if !ok {
		s.log.Info("a Slack user not allowed to decide pressed a button", "id", target.ID, "user", c.UserID, "action", c.Action)
		return nil, "Not allowed — ask " + s.mentionOf(ctx, target.Owner) +
			". Only the owner, the resolvers and the escalation steps in the n8n-guard config decide this; nothing changed."
	}
	return target, ""
}

// carryOut does what a decision needs outside the outbox, after checking
// that the button was rendered for the notification as it stands (key
// attempt, version). It returns the retried execution's id, or the
// refusal.
func (s *Service) carryOut(ctx context.Context, target *Record, c Click, decision string, attempt, version int) (retriedAs, refusal string) {
	switch decision {
	case DecisionCompleted, DecisionRetry:
		return "", s.resolveKey(ctx, target, c, attempt, version)
	}
	if stale(target, attempt, version) {
		return "", s.outOfDate(target)
	}
	if decision == DecisionRetried {
		if refusal := s.checkExecution(ctx, target); refusal != "" { // execcheck.go
			return "", refusal
		}
		if guarded, answer, refusal := s.rerunAtGate(ctx, target, c); guarded { // rerun.go
			if refusal == "" {
				s.ephemeral(ctx, c, answer)
			}
			return "", refusal
		}
		return s.retryExecution(ctx, target)
	}
	return "", ""
}

// outOfDate answers a click on a button rendered for an older attempt or
// version of the notification.
func (s *Service) outOfDate(r *Record) string {
	s.m.refusedClicks.Inc()
	base := baseURL(cmpOr(s.cfg.PublicURL, s.cfg.GuardURL))
	where := base + "/ui/notifications"
	if r.Kind == KindKeyUnknown {
		where = base + "/ui/key?" + url.Values{"namespace": {r.Namespace}, "key": {r.Key}}.Encode()
	}
	return fmt.Sprintf("This message is out of date (it was shown for an earlier attempt or state); nothing changed. The current state: %s", mrkdwn.Escape(where))
}

func baseURL(u string) string {
	if u == "" {
		return "$N8N_GUARD_URL"
	}
	return u
}

// record saves the decision on the notification and on every escalation
// message about it.
func (s *Service) record(ctx context.Context, id, decision, user, retriedAs string) error {
	now := s.now()
	updated, err := s.outbox.Update(ctx, id, func(x *Record) { *x = *decide(x, decision, user, retriedAs, now, false) })
	if err == nil && updated == nil {
		err = errors.New("the notification is gone")
	}
	if err != nil {
		return err
	}
	s.updateEscalations(ctx, updated, func(x *Record) *Record { return decide(x, decision, user, retriedAs, now, true) })
	return nil
}

// updateEscalations applies next to every escalation message of r; they
// carry r's version, which their buttons act on.
func (s *Service) updateEscalations(ctx context.Context, r *Record, next func(*Record) *Record) {
	for _, id := range r.Escalations {
		if _, err := s.outbox.Update(ctx, id, func(x *Record) {
			*x = *next(x)
			x.Version = r.Version
		}); err != nil {
			s.log.Warn("updating an escalation message failed", "id", id, "err", err)
		}
	}
}

// resolveKey records the decision on the key, for the attempt the button
// was rendered for. It returns the answer for the person when nothing
// changed.
func (s *Service) resolveKey(ctx context.Context, r *Record, c Click, attempt, version int) string {
	if s.opts.Keys == nil {
		return "This n8n-guard cannot resolve keys from Slack (no store is wired to notifications); nothing changed."
	}
	cur, err := s.opts.Keys.Lookup(ctx, r.Namespace, r.Key)
	if err != nil {
		s.log.Warn("looking up a key for a Slack decision failed", "namespace", r.Namespace, "key", r.Key, "err", err)
		return "n8n-guard could not read the key (its store failed); nothing changed. Try again."
	}
	if cur.Record == nil {
		return fmt.Sprintf("Key `%s` is not in the store any more (purged); nothing changed.", mrkdwn.Escape(r.Key))
	}
	if r.KeyAttempt != 0 && cur.Record.Attempt != r.KeyAttempt {
		// The message is about an attempt that is over: whatever the key
		// is now, nobody looked at it through this message.
		return s.outOfDate(r)
	}
	if cur.Record.State != keystore.StateUnknown {
		s.resolvedElsewhere(ctx, r, cur.Record, s.now())
		return alreadyResolved(cur.Record)
	}
	if stale(r, attempt, version) {
		return s.outOfDate(r)
	}
	res := keystore.StateCompleted
	note := "Decided in Slack: it happened — marked completed."
	if c.Action == ActionRetry {
		res, note = keystore.StateFailed, "Decided in Slack: it did not happen — a retry is allowed."
	}
	_, err = s.opts.Keys.Resolve(ctx, keystore.ResolveRequest{
		Namespace: r.Namespace, Key: r.Key, Resolution: res, By: c.by(), Note: note,
		Attempt: r.KeyAttempt, // 0: the message predates attempts in messages
	})
	var ke *errs.Error
	switch {
	case errors.As(err, &ke) && ke.Code == errs.Conflict:
		if again, lerr := s.opts.Keys.Lookup(ctx, r.Namespace, r.Key); lerr == nil && again.Record != nil && again.Record.State != keystore.StateUnknown {
			s.resolvedElsewhere(ctx, r, again.Record, s.now())
			return alreadyResolved(again.Record)
		}
		return "The key could not be resolved: " + mrkdwn.Escape(ke.Message) + ". Nothing changed."
	case err != nil:
		s.log.Warn("resolving a key from Slack failed", "namespace", r.Namespace, "key", r.Key, "err", err)
		return "n8n-guard could not resolve the key (" + mrkdwn.Escape(errs.MessageOf(err)) + "); nothing changed."
	}
	return ""
}

func alreadyResolved(rec *keystore.Record) string {
	if rec.ResolvedBy != "" && rec.ResolvedAt != nil {
		return fmt.Sprintf("Already resolved: %s decided `%s` at %s. Nothing changed.",
			mrkdwn.Escape(rec.ResolvedBy), rec.State, Clock(*rec.ResolvedAt))
	}
	return fmt.Sprintf("The key is `%s` now, no longer unknown. Nothing changed.", rec.State)
}

// retryExecution carries out "Retry execution" for r. It returns the new
// execution's id, or the answer for the person when nothing changed.
func (s *Service) retryExecution(ctx context.Context, r *Record) (newID, refusal string) {
	id, err := s.opts.Executions.Retry(ctx, r.ExecutionID)
	var re *RetryError
	switch {
	case errors.As(err, &re) && re.Refusal == RetryNotFound:
		return "", fmt.Sprintf("n8n does not know execution %s (deleted, or the API key may not run this workflow); nothing changed.", mrkdwn.Escape(r.ExecutionID))
	case errors.As(err, &re) && re.Refusal == RetryConflict:
		return "", "n8n refused to retry: " + mrkdwn.Escape(re.Message) + ". Nothing changed."
	case errors.As(err, &re) && re.Refusal == RetryUnauthorized:
		s.log.Error("n8n refused the API key for a retry (check N8N_API_KEY and its execution:retry scope)", "message", re.Message)
		return "", "n8n refused n8n-guard's API key; the operator must fix N8N_API_KEY. Nothing changed."
	case err != nil:
		s.log.Warn("retrying an execution in n8n failed", "execution", r.ExecutionID, "err", err)
		return "", "n8n did not confirm the retry (" + mrkdwn.Escape(Truncate(err.Error(), 200)) +
			"). Check its executions list before trying again: it may have started."
	}
	return id, ""
}

// mayDecide: the owner, the rule's resolvers and the people the message
// escalates to (a user, or a member of a group). An owner given as e-mail
// counts once Slack resolved it.
func (s *Service) mayDecide(ctx context.Context, r *Record, userID string) (bool, error) {
	return s.routeNames(ctx, r.Owner, s.cfg.routeFor(r), userID) // the owner it was sent to
}

// mayDecideNamespace is the one rule of what a Slack user may decide about
// a namespace's keys: they may when the namespace's route names them (its
// owner, resolvers or escalation steps; the default owner for a namespace
// without one), as for its stuck keys' messages. It is the Slack side of
// the namespaces a token or a signed-in person may use in the API and the
// console: whatever a click does to keys beyond its own message's key
// (an execution's keys at their re-run gate) asks it of each namespace.
func (s *Service) mayDecideNamespace(ctx context.Context, ns, userID string) (bool, error) {
	rt := s.cfg.forRoute(s.cfg.Namespaces, ns)
	return s.routeNames(ctx, rt.Owner, rt, userID)
}

// routeNames tells whether owner, or rt's resolvers or escalation steps,
// name userID: a user or a member of a group.
func (s *Service) routeNames(ctx context.Context, owner string, rt route, userID string) (bool, error) {
	if userID == "" {
		return false, nil
	}
	who := append([]string{owner}, rt.Resolvers...)
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
			members, err = s.slack.GroupMembers(ctx, g)
			return err
		})
		if c != classOK && c != ClassPermanent {
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
	return mrkdwn.Escape(owner)
}

// ephemeral answers the person who clicked, visible to them alone.
func (s *Service) ephemeral(ctx context.Context, c Click, text string) {
	if s.slack == nil || c.Channel == "" || c.UserID == "" {
		return
	}
	cl, _, err := s.call(ctx, "chat.postEphemeral", func() error { return s.slack.Ephemeral(ctx, c.Channel, c.UserID, text) })
	if cl != classOK {
		s.log.Warn("could not answer a Slack user", "user", c.UserID, "reason", slackReason(err))
	}
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
