package console

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// layout is what every page shows around its content.
type layout struct {
	Title string
	Who   *access.Principal // nil: signed out
	Via   string            // how Who signed in: "OIDC" or "shared token"
	CSRF  string
	Now   time.Time
}

func (ui *Console) layout(sess *session, title string) layout {
	l := layout{Title: title, Now: ui.now()}
	if sess != nil {
		l.Who, l.CSRF, l.Via = &sess.who, sess.csrf, sess.via
	}
	return l
}

// ---- one key ----

type keyPage struct {
	layout
	Record *keystore.Record
	// History newest first.
	History []keystore.Transition
	// CanResolve: the state lets a person decide, and the role may act.
	CanResolve bool
	// Decidable: the state lets a person decide (shown to read roles as a
	// hint that someone else must).
	Decidable bool
	// Undecidable: why a person may not resolve the parked key now and
	// what to do instead, in the domain's words (keystore.ResolveParked:
	// the API and the CLI answer the same).
	Undecidable string
	Done        string
	Problem     string
	Form        resolveForm
	// Parked is where a parked key stands (nil: not parked).
	Parked *parkedRow
	// Thread: the holder's execution in n8n, the owner, the runbook, the
	// Slack message and the breaker (thread.go).
	Thread keyThread
	// Rerun: where a re-run of the key's execution stands (rerun.go).
	Rerun keyRerun
	// Words: the key's state, stage, reason and next step in keystore's
	// words, as the CLI and Slack say them.
	Words keystore.KeyWords
}

type resolveForm struct {
	Action, Note, ResultRef string
}

func (ui *Console) keyPage(c *fiber.Ctx, sess *session) error {
	ns, key := c.Query("namespace"), c.Query("key")
	// A decision sent after the session ended comes back here after the
	// sign-in, with what the person typed (signin.go).
	if d, ok := ui.openDraft(c.Query("draft")); ok && d.Form["namespace"] == ns && d.Form["key"] == key {
		form := resolveForm{Action: d.Form["action"], Note: d.Form["note"], ResultRef: d.Form["result_ref"]}
		return ui.showKey(c, sess, http.StatusOK, ns, key, draftKept, form)
	}
	return ui.showKey(c, sess, http.StatusOK, ns, key, "", resolveForm{})
}

func (ui *Console) showKey(c *fiber.Ctx, sess *session, status int, ns, key, problem string, form resolveForm) error {
	if !sess.who.MayUse(ns) {
		return errs.Errorf(errs.Forbidden, "%q does not cover namespace %q", sess.who.Name, ns)
	}
	res, err := ui.store.Lookup(c.UserContext(), ns, key)
	if err != nil {
		return err
	}
	if res.Record == nil {
		return errs.Errorf(errs.NotFound, "no key %q in namespace %q (never seen, or purged after its retention)", key, ns)
	}
	r := res.Record
	p := keyPage{layout: ui.layout(sess, "Key "+r.Key), Record: r, Done: doneText(c.Query("done")), Problem: problem, Form: form}
	p.History = slices.Clone(r.History)
	slices.Reverse(p.History)
	p.Decidable = decidable(r, ui.now())
	if err := keystore.ResolveParked(r, false); err != nil {
		p.Undecidable = errs.MessageOf(err)
	}
	p.CanResolve = p.Decidable && sess.who.CanAct()
	p.Words = ui.keyWords(r, ui.now())
	if r.State == keystore.StateParked {
		row := ui.parkedRow(r, ui.now())
		p.Parked = &row
	}
	p.Thread = ui.keyThread(c.UserContext(), r)
	p.Rerun = ui.keyRerun(r)
	return ui.render(c, status, "key", p)
}

// decidable says whether a person may resolve the key now: keystore's
// resolve takes unknown and failed keys, reserved ones whose lease ran
// out, and parked ones as its one rule says (keystore.ResolveParked: not
// while the execution waits for the guard's resume call, which the
// console does not force) that approvals do not decide.
func decidable(r *keystore.Record, now time.Time) bool {
	switch r.State {
	case keystore.StateUnknown, keystore.StateFailed:
		return true
	case keystore.StateParked:
		if keystore.ApprovalReason(r.Reason) && r.Reason != keystore.ReasonApproved {
			return false // the approvals page decides it
		}
		return keystore.ResolveParked(r, false) == nil
	case keystore.StateReserved:
		return r.LeaseExpiresAt != nil && !now.Before(*r.LeaseExpiresAt)
	}
	return false
}

// resolve records a person's decision: mark completed (with a result
// reference), allow a retry, allow a retry and re-run the execution that
// waits at the key's re-run gate, or mark failed for good; the reason goes
// into the key's history through keystore's Resolve.
func (ui *Console) resolve(c *fiber.Ctx, sess *session) error {
	ns, key := c.FormValue("namespace"), c.FormValue("key")
	form := resolveForm{Action: c.FormValue("action"), Note: c.FormValue("note"), ResultRef: c.FormValue("result_ref")}
	if !sess.who.MayUse(ns) {
		return errs.Errorf(errs.Forbidden, "%q does not cover namespace %q", sess.who.Name, ns)
	}
	req := keystore.ResolveRequest{Namespace: ns, Key: key, By: sess.by(), Note: form.Note}
	switch form.Action {
	case "complete":
		req.Resolution, req.ResultRef = keystore.StateCompleted, form.ResultRef
	case "retry":
		req.Resolution = keystore.StateFailed
	case actionRerun:
		if ui.reruns == nil {
			return ui.showKey(c, sess, problem.Status(errs.CodeOf(rerun.ErrOff)), ns, key, errs.MessageOf(rerun.ErrOff), form)
		}
		req.Resolution, req.Rerun = keystore.StateFailed, true
	case "final":
		req.Resolution, req.Final = keystore.StateFailed, true
	default:
		return ui.showKey(c, sess, http.StatusBadRequest, ns, key, "Choose what to do with the key.", form)
	}
	res, err := ui.store.Resolve(c.UserContext(), req)
	if err != nil {
		if status := problem.Status(errs.CodeOf(err)); status < 500 && errs.CodeOf(err) != errs.NotFound {
			return ui.showKey(c, sess, status, ns, key, errs.MessageOf(err), form)
		}
		return err
	}
	if req.Rerun && !res.Replayed {
		ui.reruns.Kick()
	}
	ui.log.Info("console: key resolved", "namespace", ns, "key", key, "action", form.Action, "by", sess.by())
	return c.Redirect(keyURL(ns, key)+"&done="+url.QueryEscape(form.Action), http.StatusSeeOther)
}

// doneText confirms a decision after the redirect that follows it.
func doneText(action string) string {
	switch action {
	case "complete":
		return "The key is marked completed."
	case "retry":
		return "A new attempt may start: the next reserve is accepted. The guard re-sends nothing itself: the event is written when its sender sends it again or a person re-runs its n8n execution."
	case actionRerun:
		return "A re-run is allowed: the guard asks n8n to retry the execution, which reserves the key again; this page says when n8n started it."
	case "final":
		return "The key is marked failed for good: the next reserve is rejected."
	}
	return ""
}

func keyURL(ns, key string) string {
	return Prefix + "/key?" + url.Values{"namespace": {ns}, "key": {key}}.Encode()
}

// ---- breakers ----

type breakersPage struct {
	layout
	Items    []destinationRow
	Parking  bool
	CanReset bool
	Done     string
	// Problem: why a reset was refused; ResetDest and ResetReason keep
	// what was typed in that destination's form.
	Problem                string
	ResetDest, ResetReason string
}

func (ui *Console) breakers(c *fiber.Ctx, sess *session) error {
	return ui.showBreakers(c, sess, http.StatusOK, "", "", "")
}

func (ui *Console) showBreakers(c *fiber.Ctx, sess *session, status int, problem, dest, reason string) error {
	items, err := ui.destinationRows(c.UserContext(), sess)
	if err != nil {
		return err
	}
	return ui.render(c, status, "breakers", breakersPage{
		layout:      ui.layout(sess, "Breakers"),
		Items:       items,
		Parking:     ui.parking != nil,
		CanReset:    sess.who.CanOperate() && sess.who.Unlimited(),
		Done:        c.Query("done"),
		Problem:     problem,
		ResetDest:   dest,
		ResetReason: reason,
	})
}

// resetBreaker closes a breaker by hand, from the Breakers page or a
// destination's page (from=destination): a reset needs a reason, and a
// refused one shows the page it came from again with what was typed.
func (ui *Console) resetBreaker(c *fiber.Ctx, sess *session) error {
	dest, reason, from := c.FormValue("destination"), c.FormValue("reason"), c.FormValue("from")
	// As on the API (POST /v1/destinations/reset) and for a maintenance
	// window: a breaker is shared by every namespace that names its
	// destination, so a token limited to some may not reset it.
	if err := ui.mayHold(sess); err != nil {
		return err
	}
	if _, err := ui.store.ResetBreaker(c.UserContext(), dest, sess.by(), reason); err != nil {
		return ui.formProblem(c, sess, err, func(status int, msg string) error {
			if from == "destination" {
				return ui.showDestination(c, sess, status, dest, msg, holdForm{}, "", reason)
			}
			return ui.showBreakers(c, sess, status, msg, dest, reason)
		})
	}
	ui.log.Info("console: breaker reset", "destination", dest, "by", sess.by(), "reason", reason)
	if from == "destination" {
		return c.Redirect(destinationURL(dest)+"&done=reset", http.StatusSeeOther)
	}
	return c.Redirect(Prefix+"/breakers?done="+url.QueryEscape(dest), http.StatusSeeOther)
}

// ---- notifications ----

type notificationsPage struct {
	layout
	Configured bool
	Status     string
	Items      []noteRow
	NextURL    string
	CanResend  bool
	// Confirm is the re-send asked for, with where it would go now (nil:
	// none asked); Resent the notification re-sent, as it stands now.
	Confirm *resendPlan
	Resent  *resendPlan
	// Done names the notification re-sent when its state cannot be read
	// (no thread).
	Done string
	// Confirms: a re-send is confirmed first (the page can say where it
	// goes).
	Confirms bool
}

// noteRow is a notification with what to do about its last failure.
type noteRow struct {
	notify.Notification
	Hint string
}

// resendPlan is a re-send as the page says it: where it goes now, and
// why it died.
type resendPlan struct {
	notify.ResendPlan
	Hint string
}

func (ui *Console) notifications(c *fiber.Ctx, sess *session) error {
	p := notificationsPage{layout: ui.layout(sess, "Notifications"), Status: c.Query("status")}
	if ui.notes == nil {
		return ui.render(c, http.StatusOK, "notifications", p)
	}
	if err := notesForEveryNamespace(sess); err != nil {
		return err
	}
	p.Configured = true
	p.CanResend = ui.resender != nil && sess.who.CanOperate()
	p.Confirms = ui.thread != nil
	var err error
	if id := c.Query("resend"); id != "" && p.CanResend {
		if p.Confirm, err = ui.planResend(c, id); err != nil {
			return err
		}
	}
	if id := c.Query("done"); id != "" {
		// The notification as it stands now: the worker may have posted
		// it already, or Slack refused it again.
		if p.Resent, err = ui.planResend(c, id); err != nil && errs.CodeOf(err) != errs.NotFound {
			return err
		}
		if p.Resent == nil {
			p.Done = id
		}
	}
	page, err := ui.notes.List(c.UserContext(), notify.ListQuery{Status: notify.Status(p.Status), Limit: 50, Cursor: c.Query("cursor")})
	if err != nil {
		return err
	}
	for _, n := range page.Items {
		p.Items = append(p.Items, noteRow{Notification: n, Hint: ui.hint(n.LastFailure)})
	}
	if page.NextCursor != "" {
		p.NextURL = Prefix + "/notifications?" + url.Values{"status": {p.Status}, "cursor": {page.NextCursor}}.Encode()
	}
	return ui.render(c, http.StatusOK, "notifications", p)
}

// planResend says where notification id would go now (nil without the
// thread: the page then re-sends without a confirmation).
func (ui *Console) planResend(c *fiber.Ctx, id string) (*resendPlan, error) {
	if ui.thread == nil {
		return nil, nil
	}
	plan, err := ui.thread.PlanResend(c.UserContext(), id)
	if err != nil {
		return nil, err
	}
	return &resendPlan{ResendPlan: plan, Hint: ui.hint(plan.LastFailure)}, nil
}

func (ui *Console) resend(c *fiber.Ctx, sess *session) error {
	if err := notesForEveryNamespace(sess); err != nil {
		return err
	}
	rs := ui.resender
	if ui.notes == nil || rs == nil {
		return errs.Errorf(errs.Conflict, "this outbox cannot re-send notifications")
	}
	id := c.FormValue("id")
	n, err := rs.Resend(c.UserContext(), id)
	if err != nil {
		return err
	}
	ui.log.Info("console: notification re-sent", "id", id, "channel", n.Channel, "owner", n.Owner, "by", sess.by())
	return c.Redirect(Prefix+"/notifications?done="+url.QueryEscape(id), http.StatusSeeOther)
}

// notesForEveryNamespace refuses the notification pages to a token
// limited to namespaces: notifications are not kept by namespace (a failed
// execution has none), so it would see every team's.
func notesForEveryNamespace(sess *session) error {
	if sess.who.Unlimited() {
		return nil
	}
	return errs.Errorf(errs.Forbidden, "%q is limited to namespaces %s; notifications span every namespace: sign in as someone without namespace limits",
		sess.who.Name, strings.Join(sess.who.Namespaces, ", "))
}
