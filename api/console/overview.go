package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// waitingShown is how many waiting keys the overview lists.
const waitingShown = 20

type overviewPage struct {
	layout
	// Needs: what needs a person, one row per group (needs.go).
	Needs        []needRow
	Namespaces   []namespaceCounts
	Waiting      []*keystore.Record
	WaitingTotal int
	// Open are the destinations whose breaker is not closed, or that have
	// parked events (a catch-up under way).
	Open    []destinationRow
	Parking bool
	Notes   *noteCounts // nil: notifications are not configured
	Chart   *chart      // nil: the store keeps no activity
}

type namespaceCounts struct {
	Namespace                            string
	Reserved, Completed, Failed, Unknown int
}

type noteCounts struct {
	Queued, Retrying, Dead countCap
	// dead are the dead notifications counted: the overview names their
	// owners.
	dead []notify.Notification
}

// countCap is a count that stopped at a bound; Over says there are more.
type countCap struct {
	N    int
	Over bool
}

func (c countCap) String() string {
	if c.Over {
		return fmt.Sprintf("%d+", c.N)
	}
	return fmt.Sprint(c.N)
}

func (ui *Console) overview(c *fiber.Ctx, sess *session) error {
	ctx := c.UserContext()
	p := overviewPage{layout: ui.layout(sess, "Overview")}
	counts, err := ui.store.Counts(ctx)
	if err != nil {
		return err
	}
	for ns, byState := range counts {
		if !sess.who.MayUse(ns) {
			continue
		}
		p.Namespaces = append(p.Namespaces, namespaceCounts{Namespace: ns,
			Reserved: byState[keystore.StateReserved], Completed: byState[keystore.StateCompleted],
			Failed: byState[keystore.StateFailed], Unknown: byState[keystore.StateUnknown]})
		p.WaitingTotal += byState[keystore.StateUnknown]
	}
	slices.SortFunc(p.Namespaces, func(a, b namespaceCounts) int { return cmpString(a.Namespace, b.Namespace) })
	if p.Waiting, err = ui.waiting(ctx, sess.who); err != nil {
		return err
	}
	rows, err := ui.destinationRows(ctx, sess)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.State != keystore.BreakerClosed || r.Parked > 0 || r.Woken > 0 {
			p.Open = append(p.Open, r)
		}
	}
	p.Parking = ui.parking != nil
	// Notifications are not kept by namespace: a token limited to some
	// sees none of them (as on /v1/notifications).
	if ui.notes != nil && sess.who.Unlimited() {
		if p.Notes, err = ui.countNotes(ctx); err != nil {
			return err
		}
	}
	if p.Needs, err = ui.needs(ctx, sess, rows, p.Notes); err != nil {
		return err
	}
	now := ui.now().UTC()
	hours, err := ui.store.Activity(ctx, now.Truncate(time.Hour).Add(-(chartHours-1)*time.Hour))
	if err != nil {
		return err
	}
	p.Chart = drawChart(hours, now)
	return ui.render(c, http.StatusOK, "overview", p)
}

// waiting returns the oldest unknown keys the principal may see.
func (ui *Console) waiting(ctx context.Context, who access.Principal) ([]*keystore.Record, error) {
	page, err := ui.store.List(ctx, keystore.ListQuery{State: keystore.StateUnknown, Oldest: true, Limit: waitingShown * 5})
	// A token limited to some namespaces may see fewer: it gets what the
	// first pages hold, and the count of all waiting keys it may see.
	if err != nil {
		return nil, err
	}
	var out []*keystore.Record
	for _, r := range page.Items {
		if who.MayUse(r.Namespace) && len(out) < waitingShown {
			out = append(out, r)
		}
	}
	return out, nil
}

// noteCountCap bounds how many notifications of one status are counted:
// past it the overview says "500+" rather than walk a huge outbox.
const noteCountCap = 500

// countNotes counts the outbox by what the person on call cares about:
// queued (never tried), retrying (tried, will try again), dead.
func (ui *Console) countNotes(ctx context.Context) (*noteCounts, error) {
	var nc noteCounts
	pending, err := ui.notes.List(ctx, notify.ListQuery{Status: notify.StatusPending, Limit: noteCountCap})
	if err != nil {
		return nil, err
	}
	for _, n := range pending.Items {
		if n.Attempts == 0 {
			nc.Queued.N++
		} else {
			nc.Retrying.N++
		}
	}
	over := pending.NextCursor != ""
	nc.Queued.Over, nc.Retrying.Over = over, over
	dead, err := ui.notes.List(ctx, notify.ListQuery{Status: notify.StatusDead, Limit: noteCountCap})
	if err != nil {
		return nil, err
	}
	nc.Dead, nc.dead = countCap{N: len(dead.Items), Over: dead.NextCursor != ""}, dead.Items
	return &nc, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
