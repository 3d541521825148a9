package console

import (
	"net/http"
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/notify"
)

// The failed executions n8n's error workflow reported (notify's
// workflow_failed notifications): what failed where, a link to the
// execution, how often (a storm is one row), and whether someone took it
// on; a person who may decide acknowledges or snoozes it here, the way
// the Slack buttons do, so the Slack message shows it too.

type failuresPage struct {
	layout
	Configured bool
	Items      []failureRow
	NextURL    string
	CanDecide  bool
	Done       string
}

// failureRow is one failed execution as the page shows it.
type failureRow struct {
	ID, Workflow, WorkflowURL, Node, Error string
	Execution, ExecutionURL                string
	Count                                  int
	First, Last                            time.Time
	// State: "open", "acknowledged", "snoozed" or "retried"; By and At who
	// and when; Until the end of a snooze.
	State, By string
	At, Until *time.Time
	Open      bool // nobody took it on: the buttons are offered
	// Owner who hears about it; NotTold: its Slack message died, so
	// nobody did.
	Owner   ownerRef
	NotTold bool
}

func (ui *Console) failures(c *fiber.Ctx, sess *session) error {
	p := failuresPage{layout: ui.layout(sess, "Failed executions"), Done: failureDone(c.Query("done"), c.Query("slack"))}
	if ui.thread == nil {
		return ui.render(c, http.StatusOK, "failures", p)
	}
	if err := notesForEveryNamespace(sess); err != nil {
		return err
	}
	p.Configured, p.CanDecide = true, sess.who.CanAct()
	page, err := ui.thread.Failures(c.UserContext(), c.Query("cursor"), 50)
	if err != nil {
		return err
	}
	for _, r := range page.Items {
		p.Items = append(p.Items, ui.failureRow(r))
	}
	if page.NextCursor != "" {
		p.NextURL = Prefix + "/failures?" + url.Values{"cursor": {page.NextCursor}}.Encode()
	}
	return ui.render(c, http.StatusOK, "failures", p)
}

func (ui *Console) failureRow(r *notify.Record) failureRow {
	row := failureRow{ID: r.ID, Workflow: cmpStr(r.WorkflowName, r.WorkflowID), Node: r.Node, Error: r.Message,
		Execution: r.ExecutionID, Count: r.Count, First: r.FirstAt, Last: r.LastAt, State: "open", Open: true}
	row.Owner = ownerRef{People: ui.persons(r.Owner), Channel: r.Channel}
	row.NotTold = r.Status == notify.StatusDead
	if r.ErrorName != "" && r.Message == "" {
		row.Error = r.ErrorName
	}
	links := n8nLinksOf(ui.n8nURL, holder{WorkflowID: r.WorkflowID, ExecutionID: r.ExecutionID})
	row.WorkflowURL, row.ExecutionURL = links.Workflow, cmpStr(links.Execution, links.Executions)
	if u := webURL(r.ExecutionURL); u != "" {
		row.ExecutionURL = u // n8n's own link, as its error workflow sent it
	}
	if r.Decision != "" {
		row.State, row.At, row.Until, row.Open = r.Decision, r.DecidedAt, r.SnoozedUntil, false
		row.By = r.DecidedByName
		if r.DecidedBy != "" {
			row.By = "Slack user " + r.DecidedBy
		}
	}
	return row
}

// decideFailure acknowledges or snoozes a failed execution.
func (ui *Console) decideFailure(c *fiber.Ctx, sess *session) error {
	if err := notesForEveryNamespace(sess); err != nil {
		return err
	}
	if ui.thread == nil {
		return errs.Errorf(errs.Conflict, "notifications are not configured")
	}
	id, action := c.FormValue("id"), c.FormValue("action")
	act := map[string]string{"acknowledge": notify.ActionAck, "snooze": notify.ActionSnooze}[action]
	if act == "" {
		return errs.Errorf(errs.InvalidRequest, "choose acknowledge or snooze")
	}
	r, err := ui.thread.DecideFailure(c.UserContext(), id, act, sess.by())
	if err != nil {
		return err
	}
	ui.log.Info("console: failed execution "+action+"d", "id", id, "by", sess.by())
	q := url.Values{"done": {action}}
	if r.Status != notify.StatusDelivered {
		q.Set("slack", string(r.Status)) // the confirmation says no Slack message shows it
	}
	return c.Redirect(Prefix+"/failures?"+q.Encode(), http.StatusSeeOther)
}

// failureDone confirms a decision in words true of its Slack message:
// slack is "" when it was delivered, else its status (dead: it never
// will be; pending: not yet).
func failureDone(action, slack string) string {
	var done string
	switch action {
	case "acknowledge":
		done = "Acknowledged: escalation stops, and the audit records it"
	case "snooze":
		done = "Snoozed for an hour: the owner is reminded then in a new Slack message, unless someone acknowledges it; the audit records it"
	default:
		return ""
	}
	switch slack {
	case "":
		if action == "acknowledge" {
			return done + "; the Slack message says you are on it."
		}
		return done + "."
	case string(notify.StatusDead):
		return done + ". Its Slack message could not be delivered, so no Slack message shows this and its owner was not told: tell them, or re-send it from Notifications."
	}
	return done + ". Its Slack message is not delivered yet; it will show this once it is."
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
