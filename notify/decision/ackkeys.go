package decision

import (
	"context"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// ackKeys writes an acknowledgement or a snooze taken in Slack into the
// history of the keys the message is about: its key, or every key of its
// group still open. The state of no key changes. A store that cannot
// (not a keystore.AckStore) or a key that is gone is logged, not
// answered: the decision on the message stands.
func (d *Decider) ackKeys(ctx context.Context, target *notify.Record, decision string, c Click) {
	if target.Kind != notify.KindKeyUnknown || (decision != notify.DecisionAcknowledged && decision != notify.DecisionSnoozed) {
		return
	}
	if d.keys == nil {
		return
	}
	as := d.keys
	ev, what := keystore.HistoryAcknowledged, "Leave it to me (Slack)"
	if decision == notify.DecisionSnoozed {
		ev, what = keystore.HistorySnoozed, "Snoozed in Slack"
	}
	by := c.by()
	req := keystore.AckRequest{Event: ev, By: by, Detail: what + ", message " + target.ID}
	if !target.IsKeyGroup() {
		req.Namespace, req.Key, req.Attempt = target.Namespace, target.Key, target.KeyAttempt
		d.ackKey(ctx, as, req)
		return
	}
	req.Detail = what + " for the group of " + notify.Plural(target.Count, "key", "keys") + ", message " + target.ID
	var after *notify.Member
	for ctx.Err() == nil {
		page, err := d.outbox.Members(ctx, target.ID, after, memberPage)
		if err != nil {
			d.log.Warn("reading the keys of a group for an acknowledgement failed", "id", target.ID, "err", err)
			return
		}
		for _, m := range page {
			if !m.Settled {
				req.Namespace, req.Key, req.Attempt = m.Namespace, m.Key, m.Attempt
				d.ackKey(ctx, as, req)
			}
		}
		if len(page) < memberPage {
			return
		}
		after = &page[len(page)-1]
	}
}

func (d *Decider) ackKey(ctx context.Context, as keystore.AckStore, req keystore.AckRequest) {
	if _, err := as.Acknowledge(ctx, req); err != nil {
		d.log.Warn("recording an acknowledgement in a key's history failed", "namespace", req.Namespace, "key", req.Key, "err", err)
	}
}
