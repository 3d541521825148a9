package console

import (
	"context"
	"fmt"
	"math"
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

// Parking on the console (keystore/park.go): parked counts, maintenance
// windows and catch-up per destination, the parked keys with the lost and
// overdue ones marked, and the forms that set and end a window.

// Parking is what the console needs of a store that parks events
// (keystore.ParkStore), passed as Config.Parking.
type Parking interface {
	ParkedCounts(ctx context.Context) (map[string]int, error)
	WokenCounts(ctx context.Context) (map[string]int, error)
	HoldDestination(ctx context.Context, destination, by, reason string, until time.Time) (keystore.Breaker, error)
	EndHold(ctx context.Context, destination, by, reason string) (keystore.Breaker, error)
}

// destinationRow is a breaker as the console shows it: with its parked
// count, the events n8n woke whose executions have not reserved again
// (keystore.Woken), and where its catch-up stands.
type destinationRow struct {
	keystore.Breaker
	Parked  int
	Woken   int
	CatchUp string
}

// parkedCounts returns the parked and the woken keys per destination
// (none when the store does not park).
func (ui *Console) parkedCounts(ctx context.Context) (parked, woken map[string]int, err error) {
	if ui.parking == nil {
		return map[string]int{}, map[string]int{}, nil
	}
	if parked, err = ui.parking.ParkedCounts(ctx); err != nil {
		return nil, nil, err
	}
	woken, err = ui.parking.WokenCounts(ctx)
	return parked, woken, err
}

// destinationRows are the breakers the session may see, with their
// parked counts; a destination with parked keys but no breaker row (a
// reset) is listed too.
func (ui *Console) destinationRows(ctx context.Context, sess *session) ([]destinationRow, error) {
	all, err := ui.store.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	parked, woken, err := ui.parkedCounts(ctx)
	if err != nil {
		return nil, err
	}
	now := ui.now()
	var rows []destinationRow
	seen := map[string]bool{}
	for _, b := range all {
		seen[b.Destination] = true
		if sess.who.MayUseBreaker(b.Destination) {
			rows = append(rows, ui.row(pausedViews(sess.who, b), parked[b.Destination], woken[b.Destination], now))
		}
	}
	for _, counts := range []map[string]int{parked, woken} {
		for dest := range counts {
			if !seen[dest] && sess.who.MayUseBreaker(dest) {
				seen[dest] = true
				rows = append(rows, ui.row(keystore.Breaker{Destination: dest, State: keystore.BreakerClosed}, parked[dest], woken[dest], now))
			}
		}
	}
	slices.SortFunc(rows, func(a, b destinationRow) int { return cmpString(a.Destination, b.Destination) })
	return rows, nil
}

func (ui *Console) row(b keystore.Breaker, parked, woken int, now time.Time) destinationRow {
	text := catchUpText(b, parked, ui.policies.Destination(b.Destination), now)
	if woken > 0 {
		w := fmt.Sprintf("%d woken, waiting for their executions to reserve again", woken)
		text = strings.TrimPrefix(text+"; "+w, "; ")
	}
	return destinationRow{Breaker: b, Parked: parked, Woken: woken, CatchUp: text}
}

// catchUpText says where a destination's catch-up stands: what its parked
// events wait for, or how long the rest will take at its pace.
func catchUpText(b keystore.Breaker, parked int, dp keystore.DestinationPolicy, now time.Time) string {
	if parked == 0 {
		return ""
	}
	switch {
	case b.State == keystore.BreakerOpen && b.Maintenance != nil:
		return fmt.Sprintf("%d parked: resumed after the maintenance window (%s)", parked, until(b.Maintenance.Until.Sub(now)))
	case b.State == keystore.BreakerOpen && b.ReopensAt != nil:
		return fmt.Sprintf("%d parked: waiting for the destination; one is resumed as the probe %s", parked, until(b.ReopensAt.Sub(now)))
	case b.State == keystore.BreakerHalfOpen && b.ProbeInFlight(now):
		return fmt.Sprintf("%d parked: probing, one resumed event tests the destination; the rest follow when it completes", parked)
	case b.State == keystore.BreakerHalfOpen:
		return fmt.Sprintf("%d parked: the oldest is resumed next as the probe; the rest follow when it completes", parked)
	case len(b.Views) > 0:
		return fmt.Sprintf("%d parked: those of a namespace paused alone wait for its own probe, the rest are resumed at %g a second", parked, dp.CatchUpRate)
	}
	left := time.Duration(math.Ceil(float64(parked)/dp.CatchUpRate)) * time.Second
	return fmt.Sprintf("catching up: %d left, about %s at %g a second", parked, span(left), dp.CatchUpRate)
}

// ---- one destination ----

type destinationPage struct {
	layout
	Row       destinationRow
	Parking   bool // the store parks events
	CanHold   bool
	HoldForm  holdForm
	EndReason string
	// CanReset: the person may reset the breaker; ResetReason keeps what
	// a refused reset's form held.
	CanReset    bool
	ResetReason string
	Problem     string
	Done        string
	Parked      []parkedRow
	ParkedURL   string
}

type holdForm struct{ Until, Reason string }

// holdUntilLayout is the value of an <input type="datetime-local">, in
// UTC as every time on the console.
const holdUntilLayout = "2006-01-02T15:04"

func (ui *Console) destinationPage(c *fiber.Ctx, sess *session) error {
	return ui.showDestination(c, sess, http.StatusOK, c.Query("name"), "", holdForm{}, "", "")
}

func (ui *Console) showDestination(c *fiber.Ctx, sess *session, status int, dest, problem string, form holdForm, endReason, resetReason string) error {
	if err := keystore.CheckNamespace("destination", dest); err != nil {
		return err
	}
	if !sess.who.MayUseBreaker(dest) {
		return errs.Errorf(errs.Forbidden, "the token %q may not use destination %q", sess.who.Name, dest)
	}
	rows, err := ui.destinationRows(c.UserContext(), sess)
	if err != nil {
		return err
	}
	p := destinationPage{layout: ui.layout(sess, "Destination "+dest), Parking: ui.parking != nil, Problem: problem,
		HoldForm: form, EndReason: endReason, Done: holdDoneText(c.Query("done")),
		CanReset: sess.who.CanOperate() && sess.who.Unlimited(), ResetReason: resetReason}
	p.Row = ui.row(keystore.Breaker{Destination: dest, State: keystore.BreakerClosed}, 0, 0, ui.now())
	for _, r := range rows {
		if r.Destination == dest {
			p.Row = r
		}
	}
	p.CanHold = ui.mayHold(sess) == nil && ui.parking != nil
	if p.HoldForm.Until == "" {
		p.HoldForm.Until = ui.now().UTC().Add(time.Hour).Format(holdUntilLayout)
	}
	p.ParkedURL = Prefix + "/parked?" + url.Values{"destination": {dest}}.Encode()
	page, err := ui.parkedPage(c.UserContext(), sess, parkedFilter{Destination: dest}, "", parkedShown)
	if err != nil {
		return err
	}
	p.Parked = page.rows
	return ui.render(c, status, "destination", p)
}

func holdDoneText(done string) string {
	switch done {
	case "hold":
		return "The maintenance window is set: events with a resume URL park until it ends, then catch up."
	case "end":
		return "The maintenance window has ended: one parked event probes the destination, the rest follow when it completes."
	case "reset":
		return "The breaker is reset: writes are let through again, though no probe has shown that the destination takes them."
	}
	return ""
}

// mayHold: a window pauses a destination for every namespace that names
// it, so as on the API (POST /v1/destinations/hold) it takes a role that
// may act and a token without namespace limits.
func (ui *Console) mayHold(sess *session) error {
	if !sess.who.Unlimited() {
		return errs.Errorf(errs.Forbidden, "the token %q is limited to namespaces %s; a maintenance window pauses the destination for every namespace: sign in with a token without namespace limits",
			sess.who.Name, strings.Join(sess.who.Namespaces, ", "))
	}
	return nil
}

// hold sets a maintenance window from the destination page's form.
func (ui *Console) hold(c *fiber.Ctx, sess *session) error {
	dest := c.FormValue("destination")
	form := holdForm{Until: strings.TrimSpace(c.FormValue("until")), Reason: c.FormValue("reason")}
	if err := ui.mayHold(sess); err != nil {
		return err
	}
	if ui.parking == nil {
		return errs.Errorf(errs.Unsupported, "this server's store does not keep maintenance windows")
	}
	until, err := time.ParseInLocation(holdUntilLayout, form.Until, time.UTC)
	if err != nil {
		return ui.showDestination(c, sess, http.StatusBadRequest, dest, "Give the window's end as a date and time (UTC).", form, "", "")
	}
	by := sess.by()
	if _, err := ui.parking.HoldDestination(c.UserContext(), dest, by, form.Reason, until); err != nil {
		return ui.formProblem(c, sess, err, func(status int, msg string) error {
			return ui.showDestination(c, sess, status, dest, msg, form, "", "")
		})
	}
	ui.log.Info("console: maintenance window set", "destination", dest, "until", until.Format(time.RFC3339), "reason", form.Reason, "by", sess.by())
	return c.Redirect(destinationURL(dest)+"&done=hold", http.StatusSeeOther)
}

// endHold ends a maintenance window early.
func (ui *Console) endHold(c *fiber.Ctx, sess *session) error {
	dest, reason := c.FormValue("destination"), c.FormValue("reason")
	if err := ui.mayHold(sess); err != nil {
		return err
	}
	if ui.parking == nil {
		return errs.Errorf(errs.Unsupported, "this server's store does not keep maintenance windows")
	}
	if _, err := ui.parking.EndHold(c.UserContext(), dest, sess.by(), reason); err != nil {
		return ui.formProblem(c, sess, err, func(status int, msg string) error {
			return ui.showDestination(c, sess, status, dest, msg, holdForm{}, reason, "")
		})
	}
	ui.log.Info("console: maintenance window ended", "destination", dest, "reason", reason, "by", sess.by())
	return c.Redirect(destinationURL(dest)+"&done=end", http.StatusSeeOther)
}

// formProblem shows a refusal a person can fix on the form's page (show);
// anything else (an unknown destination, a store failure) as an error page.
func (ui *Console) formProblem(c *fiber.Ctx, sess *session, err error, show func(status int, msg string) error) error {
	code := errs.CodeOf(err)
	if status := problem.Status(code); status < 500 && code != errs.NotFound && code != errs.Forbidden {
		return show(status, errs.MessageOf(err))
	}
	return err
}

func destinationURL(dest string) string {
	return Prefix + "/destination?" + url.Values{"name": {dest}}.Encode()
}

// ---- parked keys ----

// parkedShown is how many parked keys a destination's page lists.
const parkedShown = 20

// parkedRow is a parked key with where it stands and what to do, in
// keystore's words (keystore.WordsOf), as the CLI and Slack say it.
type parkedRow struct {
	*keystore.Record
	Words keystore.KeyWords
	// Execution is the id of the waiting n8n execution and ExecutionsURL
	// n8n's executions list, both read from the resume URL.
	Execution, ExecutionsURL string
}

// Status is the row's stage code (a parked phase, or overdue), which
// the lists mark by.
func (r parkedRow) Status() string { return r.Words.Stage }

// keyWords are the words of the key r at now: its namespace's
// parked_limit tells the overdue ones.
func (ui *Console) keyWords(r *keystore.Record, now time.Time) keystore.KeyWords {
	return keystore.WordsOf(r, keystore.WordsAt{ParkedLimit: ui.policies.Namespace(r.Namespace).ParkedLimit, Now: now})
}

func (ui *Console) parkedRow(r *keystore.Record, now time.Time) parkedRow {
	row := parkedRow{Record: r, Words: ui.keyWords(r, now)}
	row.Execution, row.ExecutionsURL = executionOf(r.ResumeURL)
	return row
}

// executionOf reads the execution id and n8n's executions list from a
// resume URL (<n8n>/webhook-waiting/<id>[/suffix]). The resume URL itself
// is never a link: opening it could wake the execution.
func executionOf(resumeURL string) (id, list string) {
	u, err := url.Parse(resumeURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", ""
	}
	i := strings.Index(u.Path, "/webhook-waiting/")
	if i < 0 {
		return "", ""
	}
	id, _, _ = strings.Cut(u.Path[i+len("/webhook-waiting/"):], "/")
	base := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path[:i] + "/home/executions"}
	return id, base.String()
}

type parkedFilter struct{ Destination, Namespace string }

type parkedList struct {
	rows []parkedRow
	next string
}

// parkedPage lists up to limit parked keys matching f from cursor on,
// those the session may see, the longest waiting first. The store's
// index of the wait (keystore.WaitReader) filters by destination and
// namespace; a session limited to some namespaces reads them one after
// the other.
func (ui *Console) parkedPage(ctx context.Context, sess *session, f parkedFilter, cursor string, limit int) (parkedList, error) {
	var out parkedList
	after, err := parkedCursorOf(cursor)
	if err != nil {
		return out, err
	}
	namespaces := []string{f.Namespace}
	if f.Namespace == "" {
		namespaces = sessionNamespaces(sess)
	}
	var recs []*keystore.Record
	more := false
	for _, ns := range namespaces {
		q := keystore.WaitQuery{Destination: f.Destination, Namespace: ns}
		if cursor != "" {
			if ns != "" && ns < after.AfterNamespace {
				continue // listed on an earlier page
			}
			if ns == "" || ns == after.AfterNamespace {
				q.AfterSince, q.AfterNamespace, q.AfterKey = after.AfterSince, after.AfterNamespace, after.AfterKey
			}
		}
		if recs, more, err = ui.readWaiting(ctx, recs, limit, q); err != nil {
			return out, err
		}
		if more {
			break
		}
	}
	now := ui.now()
	for _, r := range recs {
		out.rows = append(out.rows, ui.parkedRow(r, now))
	}
	if more && len(recs) > 0 {
		out.next = parkedCursor(keystore.WaitQuery{}.Next(recs[len(recs)-1]))
	}
	return out, nil
}

// parkedCursor is where the next page of parked keys begins: after the
// wait start, namespace and key of q's After.
func parkedCursor(q keystore.WaitQuery) string {
	return url.Values{"since": {q.AfterSince.UTC().Format(time.RFC3339Nano)}, "ns": {q.AfterNamespace}, "key": {q.AfterKey}}.Encode()
}

// parkedCursorOf reads a cursor parkedCursor wrote ("": the first page).
func parkedCursorOf(cursor string) (keystore.WaitQuery, error) {
	var q keystore.WaitQuery
	if cursor == "" {
		return q, nil
	}
	v, err := url.ParseQuery(cursor)
	if err == nil {
		q.AfterSince, err = time.Parse(time.RFC3339Nano, v.Get("since"))
	}
	if err != nil || v.Get("ns") == "" {
		return q, errs.InvalidField("cursor", "cursor", "cursor is not one this list gave: open the list again from its first page")
	}
	q.AfterNamespace, q.AfterKey = v.Get("ns"), v.Get("key")
	return q, nil
}

type parkedKeysPage struct {
	layout
	Destination, Namespace string
	Items                  []parkedRow
	Lost, Overdue          int
	NextURL                string
}

// parked lists parked keys, by destination and namespace: the lost and
// overdue ones marked, each with its next step.
func (ui *Console) parked(c *fiber.Ctx, sess *session) error {
	p := parkedKeysPage{layout: ui.layout(sess, "Parked"),
		Destination: strings.TrimSpace(c.Query("destination")), Namespace: strings.TrimSpace(c.Query("namespace"))}
	if p.Namespace != "" {
		if err := keystore.CheckNamespace("namespace", p.Namespace); err != nil {
			return err
		}
		if !sess.who.MayUse(p.Namespace) {
			return errs.Errorf(errs.Forbidden, "the token %q does not cover namespace %q", sess.who.Name, p.Namespace)
		}
	}
	if p.Destination != "" {
		if err := keystore.CheckNamespace("destination", p.Destination); err != nil {
			return err
		}
	}
	list, err := ui.parkedPage(c.UserContext(), sess, parkedFilter{Destination: p.Destination, Namespace: p.Namespace}, c.Query("cursor"), 100)
	if err != nil {
		return err
	}
	p.Items = list.rows
	for _, r := range p.Items {
		switch r.Status() {
		case string(keystore.PhaseLost):
			p.Lost++
		case keystore.StageWordsOverdue:
			p.Overdue++
		}
	}
	if list.next != "" {
		p.NextURL = Prefix + "/parked?" + url.Values{"destination": {p.Destination}, "namespace": {p.Namespace}, "cursor": {list.next}}.Encode()
	}
	return ui.render(c, http.StatusOK, "parked", p)
}
