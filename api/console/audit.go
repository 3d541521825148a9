package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The audit list: who decided what, when, on which key or destination,
// from the store's event log (written with each decision, in the same
// transaction), newest first. A bulk decision is one row (keystore.Audit)
// whose link lists its keys: GET /ui/audit?bulk=<id>.

type auditItem struct {
	At                          time.Time
	Who, What                   string
	Namespace, Key, Destination string
	// A bulk decision: its id, the person's reason and how many keys.
	Bulk, Note, Keys string
	// Failure: a decision on a failed execution (no key, no
	// destination); the row links the failures' page.
	Failure bool
}

// BulkURL lists the keys of the row's bulk decision.
func (it auditItem) BulkURL() string {
	return Prefix + "/audit?" + url.Values{"bulk": {it.Bulk}}.Encode()
}

type auditPage struct {
	layout
	Items   []auditItem
	Kept    string
	Before  uint64
	NextURL string
	// Bulk: the page lists the keys of this bulk decision (Summary says
	// what it decided, when the store keeps its words).
	Bulk    string
	Summary *auditItem
	AllURL  string
}

// auditPageSize is the entries read per page; fewer rows show when some
// are outside the reader's namespaces. bulkKeysPageSize is the keys per
// page of one bulk decision.
const (
	auditPageSize    = 50
	bulkKeysPageSize = 200
)

func (ui *Console) audit(c *fiber.Ctx, sess *session) error {
	p := auditPage{layout: ui.layout(sess, "Audit"), Kept: fmt.Sprintf("%d days", int(keystore.EventRetention.Hours())/24)}
	if b := c.Query("before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil || n == 0 {
			return errs.InvalidField("before", "number", "before must be the number of an event (the Older link makes it)")
		}
		p.Before = n
	}
	if p.Bulk = c.Query("bulk"); p.Bulk != "" {
		return ui.bulkKeys(c, sess, p)
	}
	entries, next, err := keystore.Audit(c.UserContext(), ui.store, p.Before, auditPageSize)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if it, ok := entryFor(sess, e); ok {
			p.Items = append(p.Items, it)
		}
	}
	if next != 0 {
		p.NextURL = Prefix + "/audit?" + url.Values{"before": {strconv.FormatUint(next, 10)}}.Encode()
	}
	return ui.render(c, http.StatusOK, "audit", p)
}

// bulkKeys lists the keys one bulk decision decided, newest first, from
// their events.
func (ui *Console) bulkKeys(c *fiber.Ctx, sess *session, p auditPage) error {
	if len(p.Bulk) > 64 || strings.ContainsAny(p.Bulk, ", \x00") {
		return errs.InvalidField("bulk", "bulk_id", "bulk must be the id of a bulk decision (the audit list links it)")
	}
	p.Title, p.AllURL = "Bulk "+p.Bulk, Prefix+"/audit"
	kept, err := ui.store.BulkActions(c.UserContext(), []string{p.Bulk})
	if err != nil {
		return err
	}
	if _, ok := kept[p.Bulk]; !ok {
		// Nothing to list, and no reason to read the whole event log (it
		// has no index by bulk on bbolt) to find that out.
		return errs.Errorf(errs.NotFound, "no bulk decision %q is known", p.Bulk)
	}
	evs, err := ui.store.RecentEvents(c.UserContext(), keystore.EventQuery{Before: p.Before, Kinds: []keystore.EventKind{keystore.EventKeyResolved},
		Bulk: p.Bulk, Limit: bulkKeysPageSize})
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if it, ok := auditOf(ev); ok && mayRead(sess, it) {
			p.Items = append(p.Items, it)
		}
	}
	// Who decided and why: for a reader limited to namespaces, only
	// beside keys of its own (a bulk id is short, and may be chosen).
	if a, ok := kept[p.Bulk]; ok && a.Resolution != "" && (sess.who.Unlimited() || len(p.Items) > 0) {
		it := bulkItem(keystore.AuditEntry{Event: keystore.Event{At: a.At, Owner: a.By, Bulk: a.ID, Message: string(a.Resolution)}, Action: &a}, 0)
		p.Summary = &it
	}
	if len(evs) == bulkKeysPageSize {
		p.NextURL = Prefix + "/audit?" + url.Values{"bulk": {p.Bulk}, "before": {strconv.FormatUint(evs[len(evs)-1].Seq, 10)}}.Encode()
	}
	return ui.render(c, http.StatusOK, "audit", p)
}

// mayRead: a row about a key needs its namespace, one about a
// destination its breaker.
func mayRead(sess *session, it auditItem) bool {
	return (it.Key == "" || sess.who.MayUse(it.Namespace)) && (it.Destination == "" || sess.who.MayUseBreaker(it.Destination))
}

// entryFor reads one entry of the audit as sess may see it: a bulk
// decision counts only the keys of the namespaces sess may use, wherever
// its newest key is, and is left out when it decided none of them.
func entryFor(sess *session, e keystore.AuditEntry) (auditItem, bool) {
	if e.Kind == keystore.EventKeyResolved && e.Bulk != "" && !sess.who.Unlimited() {
		n := 0
		for ns, k := range e.Namespaces {
			if sess.who.MayUse(ns) {
				n += k
			}
		}
		if n == 0 {
			return auditItem{}, false
		}
		return bulkItem(e, n), true
	}
	if e.Kind == keystore.EventFailureDecided && !sess.who.Unlimited() {
		// Failures are not kept by namespace: as their page, for a reader
		// of every namespace only.
		return auditItem{}, false
	}
	it, ok := auditOfEntry(e)
	return it, ok && mayRead(sess, it)
}

// auditOfEntry reads one row of the audit: a bulk decision, or a single
// one (auditOf).
func auditOfEntry(e keystore.AuditEntry) (auditItem, bool) {
	if e.Kind == keystore.EventKeyResolved && e.Bulk != "" {
		return bulkItem(e, e.Keys), true
	}
	return auditOf(e.Event)
}

// bulkItem says what a bulk decision did to n keys' events (n 0: the
// summary above its keys, without a count) in the words of the bulk page.
func bulkItem(e keystore.AuditEntry, n int) auditItem {
	it := auditItem{At: e.At, Who: e.Owner, Namespace: e.Namespace, Key: e.Key, Bulk: e.Bulk, Keys: keys(n)}
	res, final, rerun, kept := keystore.State(e.Message), false, false, e.Action != nil && e.Action.Resolution != ""
	if kept {
		// The kept words: who and the reason, and whether it was final
		// or re-ran the executions, which the key events do not say.
		a := e.Action
		it.Who, it.Note, res, final, rerun = a.By, a.Note, a.Resolution, a.Final, a.Rerun
	}
	events := thousands(n) + " events"
	switch {
	case n == 0:
		events = "the events of its keys"
	case n == 1:
		events = "1 event"
	}
	switch {
	case res == keystore.StateCompleted:
		it.What = "marked " + events + " as written"
	case final:
		it.What = "marked " + events + " failed for good"
	case kept && rerun:
		it.What = "allowed " + events + " to be sent again and re-ran their executions in n8n"
	case kept:
		it.What = "allowed " + events + " to be sent again"
	default:
		// An action kept by an earlier release: failed, retryable or not.
		it.What = "marked " + events + " failed"
	}
	return it
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
	case keystore.EventFailureDecided:
		it.Who, it.What, it.Failure = ev.Owner, ev.Message+" the failed "+ev.Summary, true
		return it, true
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
