package decision

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// memberPage is how many keys of a group are read at a time, and
// memberWorkers how many of them are resolved at once.
const (
	memberPage    = 200
	memberWorkers = 8
)

// actGroup carries out a group's "it happened" / "it did not happen":
// every key of the group still unknown at its attempt gets the decision,
// named in its history by the person and the bulk id; a key decided
// meanwhile is skipped, not decided again. The keys' resolutions come back
// as key-resolved events, which count them on the message (keySettled).
// The caller holds the notification's click lock.
func (d *Decider) actGroup(ctx context.Context, target *notify.Record, c Click, version int) {
	step := groupClick(target, c.Action, version)
	if step.Refusal != "" {
		d.m.refusedClicks.Inc()
		d.ephemeral(ctx, c, step.Refusal)
		return
	}
	if d.keys == nil {
		d.ephemeral(ctx, c, "This n8n-guard cannot resolve keys from Slack (no store is wired to notifications); nothing changed.")
		return
	}
	res, note := keystore.StateCompleted, "Decided in Slack for the whole group: it happened — marked completed."
	if step.Decision == notify.DecisionRetry {
		res, note = keystore.StateFailed, "Decided in Slack for the whole group: it did not happen — a retry is allowed."
	}
	by := c.by()
	bulk := "slack-" + target.ID + "-" + strconv.Itoa(target.Version+1)
	decided, skipped, failed := d.decideMembers(ctx, target, keystore.ResolveRequest{Resolution: res, By: by, Note: note, Bulk: bulk})
	if decided == 0 && failed > 0 {
		d.ephemeral(ctx, c, fmt.Sprintf("n8n-guard could not resolve the keys of this group (%s failed, see its log); nothing changed. Try again.",
			notify.Plural(failed, "key", "keys")))
		return
	}
	if err := d.notes.RecordGroupDecision(ctx, target.ID, step.Decision, c.UserID, bulk, decided, skipped); err != nil {
		d.log.Error("recording a group decision from Slack failed", "id", target.ID, "err", err)
	}
	d.m.decisions.WithLabelValues(step.Decision).Inc()
	d.log.Info("group decision from Slack", "id", target.ID, "decision", step.Decision, "user", c.UserID, "bulk", bulk,
		"namespace", target.Namespace, "decided", decided, "skipped", skipped, "failed", failed)
	switch {
	case failed > 0:
		d.ephemeral(ctx, c, fmt.Sprintf("Decided %s; %s could not be resolved (the store failed) and stay open: press again to retry them.",
			notify.Plural(decided, "key", "keys"), notify.Plural(failed, "key", "keys")))
	case decided == 0:
		d.ephemeral(ctx, c, fmt.Sprintf("Every key of this group was decided elsewhere already (%s); nothing changed.", notify.Plural(skipped, "key", "keys")))
	}
}

// decideMembers resolves the open keys of target's group with req (its
// namespace and key filled in per key).
func (d *Decider) decideMembers(ctx context.Context, target *notify.Record, req keystore.ResolveRequest) (decided, skipped, failed int) {
	var after *notify.Member
	for ctx.Err() == nil {
		page, err := d.outbox.Members(ctx, target.ID, after, memberPage)
		if err != nil {
			d.log.Error("reading the keys of a group failed", "id", target.ID, "err", err)
			return decided, skipped, failed + 1
		}
		// Keys are resolved a few at a time: the stores commit concurrent
		// writes together (bbolt's group commit), so a large group does
		// not wait for one fsync per key.
		outcomes := make([]memberOutcome, len(page))
		var wg sync.WaitGroup
		sem := make(chan struct{}, memberWorkers)
		for i, m := range page {
			if m.Settled {
				outcomes[i] = memberSkipped
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				outcomes[i] = d.decideMember(ctx, m, req)
			}()
		}
		wg.Wait()
		for _, o := range outcomes {
			switch o {
			case memberDecided:
				decided++
			case memberSkipped:
				skipped++
			default:
				failed++
			}
		}
		if len(page) < memberPage {
			break
		}
		after = &page[len(page)-1]
	}
	return decided, skipped, failed
}

type memberOutcome int

const (
	memberDecided memberOutcome = iota
	memberSkipped
	memberFailed
)

// decideMember resolves one key of a group if it is still unknown at the
// member's attempt; a key decided meanwhile (or purged, or at a later
// attempt) is skipped and counted as settled.
func (d *Decider) decideMember(ctx context.Context, m notify.Member, req keystore.ResolveRequest) memberOutcome {
	cur, err := d.keys.Lookup(ctx, m.Namespace, m.Key)
	if err != nil {
		d.log.Warn("looking up a key of a group failed", "namespace", m.Namespace, "key", m.Key, "err", err)
		return memberFailed
	}
	if cur.Record == nil || cur.Record.Attempt != m.Attempt || cur.Record.State != keystore.StateUnknown {
		if cur.Record == nil || cur.Record.Attempt != m.Attempt {
			d.settleGone(ctx, m) // no key-resolved event will count it
		}
		return memberSkipped
	}
	req.Namespace, req.Key, req.Attempt = m.Namespace, m.Key, m.Attempt // a later attempt is not this group's
	_, err = d.keys.Resolve(ctx, req)
	var ke *errs.Error
	switch {
	case errors.As(err, &ke) && ke.Code == errs.Conflict:
		return memberSkipped // decided between the look and the resolve
	case err != nil:
		d.log.Warn("resolving a key of a group from Slack failed", "namespace", m.Namespace, "key", m.Key, "err", err)
		return memberFailed
	}
	return memberDecided
}

// settleGone counts a member whose attempt is over (purged, or a later
// attempt began) as decided.
func (d *Decider) settleGone(ctx context.Context, m notify.Member) {
	if err := d.notes.SettleMember(ctx, m); err != nil {
		d.log.Warn("counting a gone key of a group failed", "namespace", m.Namespace, "key", m.Key, "err", err)
	}
}
