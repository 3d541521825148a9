package console

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// The bulk decision page: GET /ui/bulk?<filter query> shows the selection,
// how many keys a decision would take (a dry run) and the form; the first
// POST /ui/bulk asks "Allow 2,000 events to be sent again?" with the
// count, the second (confirm=1, with the count the person saw) decides,
// unless the count changed meanwhile: then the new count is shown and
// asked about again. The bulk id is made at the first POST and carried
// by the form, so a confirmation sent twice decides nothing twice.

// bulkSample is how many of the selected keys the page lists.
const bulkSample = 20

type bulkPage struct {
	layout
	Filter   keystore.Filter
	Query    string // the filter as a URL query (hidden in the forms, in links)
	States   []keystore.State
	FromText string
	ToText   string
	// Count is the dry run: what a decision would do now.
	Count       keystore.BulkResult
	MatchedText string
	DecidedText string
	Skipped     []skipRow
	Sample      []*keystore.Record
	More        bool // more keys match than the sample shows
	Form        bulkForm
	// Confirm: the question before the decision, with the count asked
	// about, and what follows from it (Then).
	Confirm             bool
	Question, Then, Act string
	Changed             string // the count changed since the person looked
	Problem             string
	Done                string
	CanAct              bool
	// CanRerun: this guard can re-run n8n executions (Config.Reruns).
	CanRerun bool
}

// HasState says whether the filter selects st (the state checkboxes).
func (p bulkPage) HasState(st keystore.State) bool {
	for _, x := range p.Filter.States {
		if x == st {
			return true
		}
	}
	return false
}

type skipRow struct {
	Why string
	N   string
}

type bulkForm struct {
	Action, Note, ID string
}

// resolution is what a form's action decides.
func (f bulkForm) resolution() (res keystore.State, final bool, ok bool) {
	switch f.Action {
	case "retry", actionRerun:
		return keystore.StateFailed, false, true
	case "final":
		return keystore.StateFailed, true, true
	case "complete":
		return keystore.StateCompleted, false, true
	}
	return "", false, false
}

// question asks about a decision of n keys in words that say what
// happens to their events, and what follows.
func (f bulkForm) question(n int) (question, then string) {
	events := thousands(n) + " events"
	if n == 1 {
		events = "1 event"
	}
	switch f.Action {
	case "retry":
		return "Allow " + events + " to be sent again?",
			"Their keys are marked failed and retryable: the next reserve of each is accepted. This re-runs nothing: each event is written when its sender (or a re-run in n8n) sends it again."
	case actionRerun:
		return "Allow " + events + " to be sent again and re-run their executions in n8n?",
			"The guard asks n8n to retry each execution that waits at its re-run gate; the execution reserves its keys again, so each event is written at most once, and the other events of that execution waiting at the same gate are re-run with it. A key whose execution does not wait at a re-run gate is left as it is."
	case "final":
		return "Mark " + events + " failed for good?",
			"The next reserve of each is rejected: these events are never written."
	case "complete":
		return "Mark " + events + " completed?",
			"They took effect in the destination: a copy of each is answered as a duplicate and not written again."
	}
	return "", ""
}

func (ui *Console) bulkPage(c *fiber.Ctx, sess *session) error {
	q, err := url.ParseQuery(string(c.Request().URI().QueryString()))
	if err != nil {
		return errs.Errorf(errs.InvalidRequest, "the address's query is not readable: %v", err)
	}
	q.Del("done")
	q.Del("decided")
	q.Del("skipped")
	q.Del("no_rerun_gate")
	p := ui.newBulkPage(sess, q)
	if id := c.Query("done"); id != "" {
		// The count after it names the keys this action decided as such.
		p.Form.ID = id
		p.Done = "Decided " + keys(atoi(c.Query("decided"))) + " (bulk " + id + "); each key's history names the action and you."
		if n := atoi(c.Query("skipped")); n > 0 {
			p.Done += " " + keys(n) + " left unchanged."
		}
		if n := atoi(c.Query("no_rerun_gate")); n > 0 {
			p.Done += " Of them, " + thousands(n) + ": " + skipWords(keystore.SkipNoRerunGate) + "."
		}
	}
	return ui.showBulk(c, sess, http.StatusOK, p)
}

// newBulkPage reads the filter (the input is kept when it is broken).
func (ui *Console) newBulkPage(sess *session, q url.Values) bulkPage {
	p := bulkPage{layout: ui.layout(sess, "Bulk decision"), States: keystore.States, CanAct: sess.who.Allows(access.BulkScope),
		CanRerun: ui.reruns != nil, FromText: q.Get("from"), ToText: q.Get("to")}
	f, err := keystore.FilterFromQuery(q, nil)
	p.Filter = f
	if err != nil {
		p.Problem = errs.MessageOf(err)
		return p
	}
	p.Query = f.Query().Encode()
	return p
}

// showBulk counts (unless the filter is broken) and draws the page.
func (ui *Console) showBulk(c *fiber.Ctx, sess *session, status int, p bulkPage) error {
	if p.Query == "" {
		// A broken filter, or none: nothing is counted (an empty filter
		// would walk every key of the store to say "all of them").
		if p.Problem != "" {
			status = http.StatusBadRequest
		}
		return ui.render(c, status, "bulk", p)
	}
	if err := mayBulk(sess, p.Filter); err != nil {
		return err
	}
	if !p.Confirm { // the question shows the count of the decision asked about
		count, err := ui.count(c.UserContext(), sess, p.Filter, p.Form.ID)
		if err != nil {
			if st := problem.Status(errs.CodeOf(err)); st < 500 {
				p.Problem = errs.MessageOf(err)
				return ui.render(c, st, "bulk", p)
			}
			return err
		}
		p.Count = count
	}
	p.MatchedText, p.DecidedText = thousands(p.Count.Matched), thousands(p.Count.Decided)
	for why, n := range p.Count.Skipped {
		p.Skipped = append(p.Skipped, skipRow{Why: skipWords(why), N: thousands(n)})
	}
	sort.Slice(p.Skipped, func(i, j int) bool { return p.Skipped[i].Why < p.Skipped[j].Why })
	page, err := ui.bulkSample(c.UserContext(), p.Filter, bulkSample)
	if err != nil {
		return err
	}
	p.Sample, p.More = page.Items, page.NextCursor != ""
	return ui.render(c, status, "bulk", p)
}

// mayBulk: a decision over every namespace needs a role over every
// namespace; otherwise the filter's namespace must be the person's.
func mayBulk(sess *session, f keystore.Filter) error {
	if f.Namespace == "" && !sess.who.Unlimited() {
		return errs.Errorf(errs.Forbidden, "%q is limited to namespaces %s: choose one of them in the filter",
			sess.who.Name, strings.Join(sess.who.Namespaces, ", "))
	}
	if f.Namespace != "" && !sess.who.MayUse(f.Namespace) {
		return errs.Errorf(errs.Forbidden, "%q does not cover namespace %q", sess.who.Name, f.Namespace)
	}
	return nil
}

// bulkSubmit is POST /ui/bulk: the question, then (confirm=1) the decision.
func (ui *Console) bulkSubmit(c *fiber.Ctx, sess *session) error {
	q, _ := url.ParseQuery(c.FormValue("filter"))
	p := ui.newBulkPage(sess, q)
	p.Form = bulkForm{Action: c.FormValue("action"), Note: strings.TrimSpace(c.FormValue("note")), ID: c.FormValue("id")}
	if p.Problem != "" {
		return ui.showBulk(c, sess, http.StatusBadRequest, p)
	}
	if err := mayBulk(sess, p.Filter); err != nil {
		return err
	}
	res, final, ok := p.Form.resolution()
	switch {
	case !ok:
		p.Problem = "Choose what happened to these keys."
	case p.Form.Note == "":
		p.Problem = "Write the reason: it goes into every key's history."
	case p.Form.Action == actionRerun && ui.reruns == nil:
		p.Problem = errs.MessageOf(rerun.ErrOff)
		return ui.showBulk(c, sess, problem.Status(errs.CodeOf(rerun.ErrOff)), p)
	}
	if p.Problem != "" {
		return ui.showBulk(c, sess, http.StatusBadRequest, p)
	}
	if p.Form.ID == "" {
		p.Form.ID = keystore.NewBulkID()
	}
	// No result reference: it names one write, never the same for many keys.
	req := keystore.BulkResolveRequest{Filter: p.Filter, Resolution: res, Final: final, By: sess.by(), Note: p.Form.Note,
		Rerun: p.Form.Action == actionRerun, ID: p.Form.ID, DryRun: true}
	count, err := ui.resolveMany(c.UserContext(), req)
	if err != nil {
		if st := problem.Status(errs.CodeOf(err)); st < 500 {
			p.Problem = errs.MessageOf(err)
			return ui.showBulk(c, sess, st, p)
		}
		return err
	}
	seen, confirmed := c.FormValue("count"), c.FormValue("confirm") == "1"
	if confirmed && seen != strconv.Itoa(count.Decided) {
		p.Changed = "The count changed from " + thousands(atoi(seen)) + " to " + thousands(count.Decided) + " since you looked."
		confirmed = false
	}
	if !confirmed {
		p.Confirm, p.Count = true, count
		p.Question, p.Then = p.Form.question(count.Decided)
		p.Act = strings.TrimSuffix(p.Question, "?")
		return ui.showBulk(c, sess, http.StatusOK, p)
	}
	req.DryRun = false
	done, err := ui.resolveMany(c.UserContext(), req)
	if err != nil {
		ui.log.Error("console: bulk decision stopped part way", "id", req.ID, "by", req.By, "decided", done.Decided, "err", err)
		return err
	}
	if req.Rerun && done.Decided > 0 {
		ui.reruns.Kick()
	}
	skipped := 0
	for _, n := range done.Skipped {
		skipped += n
	}
	ui.log.Info("console: bulk decision", "id", done.ID, "by", req.By, "action", p.Form.Action, "matched", done.Matched,
		"decided", done.Decided, "skipped", done.Skipped)
	back := p.Filter.Query()
	back.Set("done", done.ID)
	back.Set("decided", strconv.Itoa(done.Decided))
	back.Set("skipped", strconv.Itoa(skipped))
	if n := done.Skipped[keystore.SkipNoRerunGate]; n > 0 {
		back.Set("no_rerun_gate", strconv.Itoa(n))
	}
	return c.Redirect(Prefix+"/bulk?"+back.Encode(), http.StatusSeeOther)
}

// count is a dry run in the person's name (the note only has to be
// there); with id, the keys that bulk action decided count as decided.
func (ui *Console) count(ctx context.Context, sess *session, f keystore.Filter, id string) (keystore.BulkResult, error) {
	return ui.resolveMany(ctx, keystore.BulkResolveRequest{Filter: f, Resolution: keystore.StateFailed, By: sess.by(),
		Note: "count", DryRun: true, ID: id})
}

func (ui *Console) resolveMany(ctx context.Context, req keystore.BulkResolveRequest) (keystore.BulkResult, error) {
	return keystore.ResolveMany(ctx, ui.store, req)
}

func (ui *Console) bulkSample(ctx context.Context, f keystore.Filter, limit int) (keystore.Page, error) {
	return keystore.Select(ctx, ui.store, f, "", limit)
}

// skipWords: the words of keystore, the same in the CLI.
func skipWords(why string) string { return keystore.SkipWords(why) }

// thousands writes n with thousands separators: 2,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// keys says "1 key", "2,000 keys".
func keys(n int) string {
	if n == 1 {
		return "1 key"
	}
	return thousands(n) + " keys"
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
