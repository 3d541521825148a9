package console

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// "Needs a person": the top of the overview, what the person on call
// reads first. Each group of things a person must do is one row, with
// how many, since when, who owns it and the one action that opens the
// page to do it on: unknown keys by incident (namespace, destination and
// reason, with the destination's breaker), approvals waiting, failed
// executions nobody took on (those whose Slack message died first: their
// owner was never told), lost and overdue parked executions. Nothing here
// changes anything; it only reads the lists the other pages show.

// needsScan bounds how many keys of one kind the overview reads to group
// them (the counts say "+" beyond).
const needsScan = 1000

type needKind string

const (
	needUnknown   needKind = "unknown"
	needApproval  needKind = "approval"
	needNotTold   needKind = "not-told" // failed executions whose Slack message died
	needFailure   needKind = "failure"
	needLost      needKind = "lost"
	needOverdue   needKind = "overdue"
	needDeadNotes needKind = "dead-notes" // other Slack messages that died
)

// needRow is one group.
type needRow struct {
	Kind  needKind
	Count int
	More  bool // the scan stopped: Count is a lower bound
	// What says the group in words, Short in a few (a phone's); Where
	// the namespace and destination.
	What, Short, Where string
	// Breaker is the destination's breaker state in words ("" : none).
	Breaker, BreakerClass string
	Oldest                time.Time
	// Owner (a person, group or e-mail) and Channel who hear about it;
	// Approvers for approvals.
	Owners    []person
	Channel   string
	Approvers []person
	// Mark: a warning the row carries ("owner not told").
	Mark string
	// Action opens the page that acts on the whole group (ActionShort: a
	// phone's label).
	Action, ActionShort, ActionURL string
}

// CountText is the count as read: "30", or "1000+".
func (r needRow) CountText() string {
	if r.More {
		return fmt.Sprintf("%d+", r.Count)
	}
	return fmt.Sprint(r.Count)
}

// person is an owner or approver as a list shows one: a Slack user's
// profile or an e-mail's mailto when the console can link it.
type person struct{ Name, URL string }

func (ui *Console) persons(ids ...string) []person {
	var out []person
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" && !slices.ContainsFunc(out, func(p person) bool { return p.Name == id }) {
			out = append(out, person{Name: id, URL: ui.personURL(id)})
		}
	}
	return out
}

// kindWords says what a notification is about, as its list reads it.
func kindWords(k notify.Kind) string {
	switch k {
	case notify.KindWorkflowFailed:
		return "execution failed"
	case notify.KindKeyUnknown:
		return "outcome unknown"
	case notify.KindBreakerOpened:
		return "destination paused"
	case notify.KindBreakerClosed:
		return "destination back"
	case notify.KindApproval:
		return "approval asked"
	case notify.KindEscalation:
		return "escalated: nobody answered"
	case notify.KindParkedLost:
		return "parked event lost"
	case notify.KindParkedOverdue:
		return "parked event overdue"
	case notify.KindRecordDamaged:
		return "damaged record"
	case notify.KindRerunRefused:
		return "re-run not started"
	}
	return strings.ReplaceAll(string(k), "_", " ")
}

// pausedViews keeps of b's namespace views those the session may see;
// a view of another namespace is told without its name.
func pausedViews(who access.Principal, b keystore.Breaker) keystore.Breaker {
	var mine []keystore.BreakerView
	others := false
	for _, v := range b.Views {
		if who.MayUse(v.Namespace) {
			mine = append(mine, v)
		} else {
			others = true
		}
	}
	if len(mine) == 0 && others {
		mine = []keystore.BreakerView{{}} // "namespaces … are paused alone", no name
	}
	b.Views = mine
	return b
}

// breakerWords says every destination's state in words.
func (ui *Console) breakerWords(ctx context.Context) (map[string]string, error) {
	all, err := ui.store.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(all))
	for _, b := range all {
		v := b.View(ui.now())
		if len(v.Views) > 0 {
			v.Views = []keystore.BreakerView{{}} // these lists span namespaces: no namespace named
		}
		out[b.Destination] = keystore.BreakerWords(v, ui.now())
	}
	return out, nil
}

// approvedWrites says when the write of a key just approved happens: now,
// or when its destination takes writes again (after the maintenance
// window, after the breaker's probe).
func (ui *Console) approvedWrites(ctx context.Context, key, dest string) string {
	now := "the guard resumes its execution now, which writes."
	if dest != "" {
		all, err := ui.store.Destinations(ctx)
		if err != nil {
			ui.log.Warn("console: the breakers could not be read", "err", err)
		}
		for _, b := range all {
			if b.Destination != dest {
				continue
			}
			b = b.View(ui.now())
			switch {
			case b.State == keystore.BreakerOpen && b.Maintenance != nil:
				now = fmt.Sprintf("%s is held for maintenance until %s (%s): the execution is resumed and writes after the window.",
					dest, b.Maintenance.Until.UTC().Format("2006-01-02 15:04 UTC"), until(b.Maintenance.Until.Sub(ui.now())))
			case b.State == keystore.BreakerOpen && b.ReopensAt != nil:
				now = fmt.Sprintf("%s is paused (breaker open): the execution is resumed and writes once the destination takes writes again (the next probe %s).",
					dest, until(b.ReopensAt.Sub(ui.now())))
			case b.State != keystore.BreakerClosed:
				now = dest + " is being probed: the execution is resumed and writes once the probe shows the destination back."
			}
		}
	}
	return key + " is approved: " + now
}

// needs reads the groups for the overview. breakers are the
// destinations the session may see; notes the notifications counted
// (nil: notifications are not shown to the session).
func (ui *Console) needs(ctx context.Context, sess *session, breakers []destinationRow, notes *noteCounts) ([]needRow, error) {
	byDest := map[string]destinationRow{}
	for _, b := range breakers {
		byDest[b.Destination] = b
	}
	var rows []needRow
	unknown, err := ui.unknownNeeds(ctx, sess, byDest)
	if err != nil {
		return nil, err
	}
	rows = append(rows, unknown...)
	approvals, err := ui.approvalNeeds(ctx, sess, byDest)
	if err != nil {
		return nil, err
	}
	rows = append(rows, approvals...)
	if ui.thread != nil && notes != nil {
		failures, err := ui.failureNeeds(ctx, *notes)
		if err != nil {
			return nil, err
		}
		rows = append(rows, failures...)
	}
	parked, err := ui.parkedNeeds(ctx, sess, byDest)
	if err != nil {
		return nil, err
	}
	return append(rows, parked...), nil
}

// ownerRef is who hears about something: people and a channel, as the
// notifications' config routes it.
type ownerRef struct {
	People  []person
	Channel string
}

// keyOwner: who hears about the stuck keys of namespace ns.
func (ui *Console) keyOwner(ns string) ownerRef {
	people, channel := ui.keyOwners(ns)
	return ownerRef{People: people, Channel: channel}
}

// destinationOwner: who hears about destination's breaker.
func (ui *Console) destinationOwner(dest string) ownerRef {
	if ui.thread == nil || dest == "" {
		return ownerRef{}
	}
	rt := ui.thread.DestinationRoute(dest)
	return ownerRef{People: ui.persons(rt.Owner), Channel: rt.Channel}
}

// approvers: who may decide namespace ns's approvals.
func (ui *Console) approvers(ns string) []person {
	if ui.thread == nil {
		return nil
	}
	return ui.persons(ui.thread.Approvers(ns)...)
}

func (ui *Console) keyOwners(ns string) ([]person, string) {
	if ui.thread == nil {
		return nil, ""
	}
	rt := ui.thread.KeyRoute(ns)
	return ui.persons(rt.Owner), rt.Channel
}

func (ui *Console) withBreaker(row *needRow, dest string, byDest map[string]destinationRow) {
	if dest == "" {
		return
	}
	b, ok := byDest[dest]
	if !ok {
		b = destinationRow{Breaker: keystore.Breaker{Destination: dest, State: keystore.BreakerClosed}}
	}
	row.Breaker, row.BreakerClass = keystore.BreakerWords(b.Breaker, ui.now()), "breaker-"+string(b.State)
}

// unknownNeeds groups the unknown keys by incident: namespace,
// destination and reason, oldest incident first.
func (ui *Console) unknownNeeds(ctx context.Context, sess *session, byDest map[string]destinationRow) ([]needRow, error) {
	type incident struct {
		ns, dest string
		reason   keystore.Reason
	}
	groups := map[incident]*needRow{}
	firstKey := map[incident]*keystore.Record{}
	var order []incident
	cursor, read, more := "", 0, false
	for {
		page, err := ui.store.List(ctx, keystore.ListQuery{State: keystore.StateUnknown, Oldest: true, Limit: 200, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, r := range page.Items {
			read++
			if !sess.who.MayUse(r.Namespace) {
				continue
			}
			in := incident{r.Namespace, r.Destination, r.Reason}
			g := groups[in]
			if g == nil {
				g = &needRow{Kind: needUnknown, Oldest: r.UpdatedAt, What: keystore.ReasonWords(r.Reason), Short: keystore.ReasonShort(r.Reason), Where: where(r.Namespace, r.Destination)}
				g.Owners, g.Channel = ui.keyOwners(r.Namespace)
				ui.withBreaker(g, r.Destination, byDest)
				groups[in], firstKey[in] = g, r
				order = append(order, in)
			}
			g.Count++
			if r.UpdatedAt.Before(g.Oldest) {
				g.Oldest = r.UpdatedAt
			}
		}
		cursor = page.NextCursor
		if cursor == "" {
			break
		}
		if read >= needsScan {
			more = true
			break
		}
	}
	rows := make([]needRow, 0, len(order))
	for _, in := range order {
		g := groups[in]
		g.More = more
		if g.Count == 1 && !more {
			r := firstKey[in]
			g.Action, g.ActionShort, g.ActionURL = "Decide "+r.Key, "Decide", keyURL(r.Namespace, r.Key)
		} else {
			q := url.Values{"namespace": {in.ns}, "state": {string(keystore.StateUnknown)}}
			if in.dest != "" {
				q.Set("destination", in.dest)
			}
			if in.reason != "" {
				q.Set("reason", string(in.reason))
			}
			g.Action, g.ActionShort, g.ActionURL = fmt.Sprintf("Decide these %s keys", g.CountText()), "Decide "+g.CountText(), Prefix+"/bulk?"+q.Encode()
		}
		rows = append(rows, *g)
	}
	return rows, nil
}

func where(ns, dest string) string {
	if dest == "" {
		return ns
	}
	return ns + " → " + dest
}

// approvalNeeds is one row per namespace with keys awaiting approval.
func (ui *Console) approvalNeeds(ctx context.Context, sess *session, byDest map[string]destinationRow) ([]needRow, error) {
	items, more, err := ui.pendingApprovals(ctx, sess)
	if err != nil {
		return nil, err
	}
	byNS := map[string]*needRow{}
	var order []string
	for _, it := range items {
		g := byNS[it.Namespace]
		if g == nil {
			g = &needRow{Kind: needApproval, Oldest: it.Since, Where: it.Namespace, Action: "Review approvals", ActionShort: "Review", ActionURL: Prefix + "/approvals"}
			g.Owners, g.Channel = ui.keyOwners(it.Namespace)
			if ui.thread != nil {
				g.Approvers = ui.persons(ui.thread.Approvers(it.Namespace)...)
			}
			byNS[it.Namespace] = g
			order = append(order, it.Namespace)
		}
		g.Count++
		if it.Since.Before(g.Oldest) {
			g.Oldest = it.Since
		}
	}
	var rows []needRow
	for _, ns := range order {
		g := byNS[ns]
		g.More = more
		g.What, g.Short = "waiting for a person's approval before they write", "awaiting approval"
		if g.Count == 1 {
			g.What = "waits for a person's approval before it writes"
		}
		rows = append(rows, *g)
	}
	return rows, nil
}

// failureNeeds: failed executions nobody acknowledged or snoozed, those
// whose Slack message died first (their owner was never told), and the
// other dead Slack messages (a failure acknowledged after its message
// died among them), each row naming the owners its messages were for.
func (ui *Console) failureNeeds(ctx context.Context, notes noteCounts) ([]needRow, error) {
	dead := notes.Dead
	page, err := ui.thread.Failures(ctx, "", needsScan)
	if err != nil {
		return nil, err
	}
	notTold := needRow{Kind: needNotTold, What: "failed executions whose Slack message could not be delivered", Short: "failed executions", Mark: "owner not told",
		Action: "See why it was not delivered", ActionShort: "See why", ActionURL: Prefix + "/notifications?status=dead"}
	open := needRow{Kind: needFailure, What: "failed executions nobody acknowledged", Short: "failed, not acknowledged", Action: "Acknowledge", ActionShort: "Acknowledge", ActionURL: Prefix + "/failures"}
	counted := map[string]bool{} // the dead messages notTold counts
	for _, r := range page.Items {
		if r.Decision != "" {
			continue
		}
		g := &open
		if r.Status == notify.StatusDead {
			g, counted[r.ID] = &notTold, true
		}
		g.Count++
		if g.Oldest.IsZero() || r.FirstAt.Before(g.Oldest) {
			g.Oldest = r.FirstAt
		}
		g.Owners = append(g.Owners, ui.persons(r.Owner)...)
		g.Owners = ui.persons(names(g.Owners)...)
		if g.Channel == "" {
			g.Channel = r.Channel
		}
	}
	var rows []needRow
	for _, g := range []needRow{notTold, open} {
		if g.Count > 0 {
			g.More = page.NextCursor != ""
			if g.Count == 1 {
				g.What, g.Short = strings.Replace(g.What, "executions", "execution", 1), strings.Replace(g.Short, "executions", "execution", 1)
			}
			rows = append(rows, g)
		}
	}
	if rest := dead.N - notTold.Count; rest > 0 {
		g := needRow{Kind: needDeadNotes, Count: rest, More: dead.Over, What: "other Slack messages could not be delivered", Short: "Slack messages dead",
			Mark: "owner not told", Action: "See why", ActionShort: "See why", ActionURL: Prefix + "/notifications?status=dead"}
		// Whom they were for: the owner is not told, not gone (a failure
		// acknowledged after its message died is one of them).
		for _, n := range notes.dead {
			if !counted[n.ID] {
				g.Owners = append(g.Owners, ui.persons(n.Owner)...)
				if g.Channel == "" {
					g.Channel = n.Channel
				}
			}
		}
		g.Owners = ui.persons(names(g.Owners)...)
		rows = append(rows, g)
	}
	return rows, nil
}

func names(ps []person) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// parkedNeeds: lost and overdue parked executions, one row per
// namespace and destination each, lost first (nothing will resume them).
func (ui *Console) parkedNeeds(ctx context.Context, sess *session, byDest map[string]destinationRow) ([]needRow, error) {
	lost, moreLost, err := ui.keysAt(ctx, sess, keystore.PhaseLost, needsScan)
	if err != nil {
		return nil, err
	}
	rows := ui.parkedRows(lost, moreLost, byDest)
	late, moreLate, err := ui.overdueKeys(ctx, sess, needsScan)
	if err != nil {
		return nil, err
	}
	// Read by the start of their wait: each group in the order of its
	// first key, as one listing by namespace and key gives it.
	slices.SortFunc(late, func(a, b *keystore.Record) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Key, b.Key))
	})
	return append(rows, ui.parkedRows(late, moreLate, byDest)...), nil
}

// parkedRows groups the lost and overdue keys of recs by status,
// namespace and destination, in the order of recs; more says recs is
// not all of them.
func (ui *Console) parkedRows(recs []*keystore.Record, more bool, byDest map[string]destinationRow) []needRow {
	type group struct {
		status   string
		ns, dest string
	}
	groups := map[group]*needRow{}
	var order []group
	now := ui.now()
	for _, rec := range recs {
		r := ui.parkedRow(rec, now)
		if r.Status() != string(keystore.PhaseLost) && r.Status() != keystore.StageWordsOverdue {
			continue
		}
		k := group{r.Status(), r.Namespace, r.Destination}
		g := groups[k]
		if g == nil {
			g = &needRow{Kind: needOverdue, Where: where(r.Namespace, r.Destination), Oldest: cmpTime(r.WaitingSince(), r.UpdatedAt),
				What: "parked executions overdue: parked longer than the namespace's parked_limit", Short: "parked, overdue"}
			if r.Status() == string(keystore.PhaseLost) {
				g.Kind, g.What, g.Short = needLost, "parked executions lost: n8n no longer holds them", "parked, lost"
			}
			g.Owners, g.Channel = ui.keyOwners(r.Namespace)
			ui.withBreaker(g, r.Destination, byDest)
			q := url.Values{"namespace": {r.Namespace}}
			if r.Destination != "" {
				q.Set("destination", r.Destination)
			}
			g.Action, g.ActionShort, g.ActionURL = "Open the parked keys", "Open", Prefix+"/parked?"+q.Encode()
			groups[k] = g
			order = append(order, k)
		}
		g.Count++
		if at := cmpTime(r.WaitingSince(), r.UpdatedAt); at.Before(g.Oldest) {
			g.Oldest = at
		}
	}
	var rows []needRow
	for _, k := range order {
		g := groups[k]
		g.More = more
		if g.Count == 1 {
			g.What = strings.Replace(g.What, "executions", "execution", 1)
			g.What = strings.Replace(g.What, "holds them", "holds it", 1)
		}
		rows = append(rows, *g)
	}
	return rows
}

func cmpTime(t *time.Time, otherwise time.Time) time.Time {
	if t != nil {
		return *t
	}
	return otherwise
}
