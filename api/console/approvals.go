package console

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Approvals (keystore/approval.go): the keys that wait for a person's
// approval, with Approve and Reject (a reason required).

type approvalItem struct {
	Namespace, Key, RequestedBy, Destination string
	// Summary: what the event is, as its reserve said; what the approver
	// judges.
	Summary string
	Since   time.Time
}

type approvalsPage struct {
	layout
	Items     []approvalItem
	CanDecide bool
	Done      string
	Problem   string
	// Breakers: each destination's state in words (a write approved now
	// waits for it).
	Breakers map[string]string
}

// approvalsShown bounds the keys awaiting approval a page lists.
const approvalsShown = 1000

// pendingApprovals lists the keys awaiting approval the session may see,
// oldest first, from the stage index; more says there are others.
func (ui *Console) pendingApprovals(ctx context.Context, sess *session) (items []approvalItem, more bool, err error) {
	recs, more, err := ui.keysAt(ctx, sess, keystore.PhaseAwaitingApproval, approvalsShown)
	if err != nil {
		return nil, false, err
	}
	for _, r := range recs {
		since := r.CreatedAt
		if r.ParkedAt != nil {
			since = *r.ParkedAt
		}
		items = append(items, approvalItem{Namespace: r.Namespace, Key: r.Key, RequestedBy: keystore.RequestedBy(r), Destination: r.Destination,
			Summary: r.Summary, Since: since})
	}
	slices.SortFunc(items, func(a, b approvalItem) int { return a.Since.Compare(b.Since) })
	return items, more, nil
}

func (ui *Console) approvals(c *fiber.Ctx, sess *session) error {
	done := doneApproval(c.Query("done"), c.Query("key"))
	if c.Query("done") == "approve" {
		done = ui.approvedWrites(c.UserContext(), c.Query("key"), c.Query("destination"))
	}
	return ui.showApprovals(c, sess, http.StatusOK, "", done)
}

func (ui *Console) showApprovals(c *fiber.Ctx, sess *session, status int, problemText, done string) error {
	items, _, err := ui.pendingApprovals(c.UserContext(), sess)
	if err != nil {
		return err
	}
	breakers, err := ui.breakerWords(c.UserContext())
	if err != nil {
		return err
	}
	return ui.render(c, status, "approvals", approvalsPage{layout: ui.layout(sess, "Approvals"), Items: items,
		CanDecide: sess.who.CanAct(), Done: done, Problem: problemText, Breakers: breakers})
}

func doneApproval(action, key string) string {
	switch action {
	case "approve":
		return key + " is approved: the guard resumes its execution, which writes."
	case "reject":
		return key + " is rejected: its execution ends without writing."
	}
	return ""
}

// decideApproval records an approval or a rejection (with its reason)
// through the store, which keeps who, when and why in the key's history.
func (ui *Console) decideApproval(c *fiber.Ctx, sess *session) error {
	ns, key, action, note := c.FormValue("namespace"), c.FormValue("key"), c.FormValue("action"), strings.TrimSpace(c.FormValue("note"))
	if !sess.who.MayUse(ns) {
		return errs.Errorf(errs.Forbidden, "the token %q does not cover namespace %q", sess.who.Name, ns)
	}
	as := ui.store
	req := keystore.ApprovalRequest{Namespace: ns, Key: key, By: sess.by(), Note: note, Identities: sess.who.Identities()}
	var err error
	var res keystore.Result
	switch action {
	case "approve":
		res, err = as.Approve(c.UserContext(), req)
	case "reject":
		res, err = as.Reject(c.UserContext(), req)
	default:
		return ui.showApprovals(c, sess, http.StatusBadRequest, "Choose Approve or Reject.", "")
	}
	if err != nil {
		if status := problem.Status(errs.CodeOf(err)); status < 500 {
			return ui.showApprovals(c, sess, status, errs.MessageOf(err), "")
		}
		return err
	}
	if res.Replayed {
		return ui.showApprovals(c, sess, http.StatusOK, "Already decided by "+res.Record.ResolvedBy+"; nothing changed.", "")
	}
	if ui.onApproval != nil {
		ui.onApproval(string(res.Outcome))
	}
	ui.log.Info("console: approval decided", "namespace", ns, "key", key, "action", action, "by", sess.by())
	return c.Redirect(Prefix+"/approvals?"+url.Values{"done": {action}, "key": {key}, "destination": {res.Record.Destination}}.Encode(), http.StatusSeeOther)
}
