package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The audit list: who decided what, when, on which key or destination,
// from the store's event log (written with each decision, in the same
// transaction), newest first.

type auditItem struct {
	At                          time.Time
	Who, What                   string
	Namespace, Key, Destination string
}

type auditPage struct {
	layout
	Items   []auditItem
	Kept    string
	Before  uint64
	NextURL string
}

// auditPageSize is the events read per page; fewer rows show when some
// are outside the reader's namespaces.
const auditPageSize = 50

func (ui *Console) audit(c *fiber.Ctx, sess *session) error {
	p := auditPage{layout: ui.layout(sess, "Audit"), Kept: fmt.Sprintf("%d days", int(keystore.EventRetention.Hours())/24)}
	if b := c.Query("before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil || n == 0 {
			return errs.InvalidField("before", "number", "before must be the number of an event (the Older link makes it)")
		}
		p.Before = n
	}
	evs, err := ui.store.RecentEvents(c.UserContext(), keystore.EventQuery{Before: p.Before, Kinds: keystore.DecisionKinds, Limit: auditPageSize})
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if it, ok := auditOf(ev); ok && (it.Key == "" || sess.who.MayUse(it.Namespace)) && (it.Destination == "" || sess.who.MayUseBreaker(it.Destination)) {
			p.Items = append(p.Items, it)
		}
	}
	if len(evs) == auditPageSize {
		p.NextURL = Prefix + "/audit?" + url.Values{"before": {strconv.FormatUint(evs[len(evs)-1].Seq, 10)}}.Encode()
	}
	return ui.render(c, http.StatusOK, "audit", p)
}

// auditOf reads a decision from an event; false for an event no person
// caused (a breaker opened by an outage, closed by a probe that got
// through).
func auditOf(ev keystore.Event) (auditItem, bool) {
	it := auditItem{At: ev.At}
	switch ev.Kind {
	case keystore.EventKeyResolved:
		it.Who, it.What, it.Namespace, it.Key = ev.Owner, "resolved the key: "+ev.Message, ev.Namespace, ev.Key
		return it, true
	case keystore.EventApprovalDecided:
		it.Who, it.What, it.Namespace, it.Key = ev.Owner, ev.Message+" the event (approval)", ev.Namespace, ev.Key
		return it, true
	case keystore.EventBreakerOpened, keystore.EventMaintenanceEnded:
		by, reason, ended, ok := keystore.MaintenanceOf(ev)
		it.Who, it.Destination = by, ev.Destination
		switch {
		case ended:
			it.What = "ended the maintenance window early because " + reason
		case ev.ReopensAt != nil:
			it.What = "set a maintenance window until " + ev.ReopensAt.UTC().Format("2006-01-02 15:04 UTC") + " because " + reason
		default:
			it.What = "set a maintenance window because " + reason
		}
		return it, ok
	case keystore.EventBreakerClosed:
		by, reason, ok := keystore.ResetOf(ev)
		it.Who, it.What, it.Destination = by, "reset the breaker", ev.Destination
		if reason != "" {
			it.What += " because " + reason
		}
		return it, ok
	}
	return it, false
}
