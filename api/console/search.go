package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	// The container image is FROM scratch: without the embedded zone
	// database a reader's zone (Europe/Berlin) could not be read there.
	_ "time/tzdata"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// searchPageSize is what one page asks the stores for. A store without
// its own Select cuts a page at the end of one of its List pages, so a
// page may hold up to about twice as many.
const searchPageSize = 50

// searchForm is the search as the person typed it, shown back as typed
// (a wrong value too). Its names are keystore.Filter's URL parameters, plus
// match (exact: Key is the whole key) and tz (the reader's time zone).
type searchForm struct {
	Namespace, Key, Match, Text, State, Holder, Destination, Reason, From, To, TZ string
}

// readSearchForm reads a search from the query, with the names older
// links use: key (now key_prefix) and owner (now holder). Several states
// come as repeated state parameters or one comma-separated value.
func readSearchForm(q url.Values) searchForm {
	first := func(names ...string) string {
		for _, n := range names {
			if v := q.Get(n); v != "" {
				return v
			}
		}
		return ""
	}
	var states []string
	for _, v := range q["state"] {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" && s != "any" {
				states = append(states, s)
			}
		}
	}
	f := searchForm{
		Namespace: q.Get("namespace"), Key: first("key_prefix", "key"), Match: q.Get("match"), Text: q.Get("text"),
		State: strings.Join(states, ","), Holder: first("holder", "owner"), Destination: q.Get("destination"),
		Reason: q.Get("reason"), From: q.Get("from"), To: q.Get("to"), TZ: q.Get("tz"),
	}
	if f.Match != "exact" {
		f.Match = "prefix"
	}
	return f
}

// values is the form as URL parameters: the filter's names, match and tz.
func (f searchForm) values() url.Values {
	q := url.Values{}
	for _, p := range [][2]string{{"namespace", f.Namespace}, {"key_prefix", f.Key}, {"text", f.Text}, {"holder", f.Holder},
		{"destination", f.Destination}, {"reason", f.Reason}, {"from", f.From}, {"to", f.To}, {"tz", f.TZ}} {
		if p[1] != "" {
			q.Set(p[0], p[1])
		}
	}
	if f.State != "" {
		q["state"] = strings.Split(f.State, ",")
	}
	if f.Match == "exact" {
		q.Set("match", "exact")
	}
	return q
}

// readerZone is where the person's datetime-local times are read: tz is
// an IANA zone name or minutes east of UTC (what the console's script
// puts into the form); empty is UTC. ok is false for a zone not known here.
func readerZone(tz string) (loc *time.Location, ok bool) {
	tz = strings.TrimSpace(tz)
	if tz == "" || tz == "UTC" {
		return time.UTC, true
	}
	if m, err := strconv.Atoi(tz); err == nil {
		if m < -14*60 || m > 14*60 {
			return time.UTC, false
		}
		sign, a := '+', m
		if m < 0 {
			sign, a = '-', -m
		}
		return time.FixedZone(fmt.Sprintf("UTC%c%02d:%02d", sign, a/60, a%60), m*60), true
	}
	// "Local" would be the server's zone, not the reader's.
	if len(tz) > 64 || tz == "Local" {
		return time.UTC, false
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return time.UTC, false
	}
	return loc, true
}

// localLayouts are the values a datetime-local input holds.
var localLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05"}

// shownTime is a time of the form as the page shows it: a link's RFC 3339
// time in the zone it is read in (a datetime-local input cannot hold a
// zone), anything else as typed. local says whether a datetime-local input
// can hold it; a value it cannot is shown in a text input, so a wrong one
// stays visible.
func shownTime(raw string, loc *time.Location) (shown string, local bool) {
	raw = strings.TrimSpace(raw)
	if t, err := time.Parse(time.RFC3339, raw); err == nil {
		t = t.In(loc)
		if t.Second() != 0 {
			return t.Format(localLayouts[1]), true
		}
		return t.Format(localLayouts[0]), true
	}
	for _, layout := range localLayouts {
		if _, err := time.Parse(layout, raw); err == nil {
			return raw, true
		}
	}
	return raw, raw == ""
}

type searchPage struct {
	layout
	Form searchForm
	// FromLocal, ToLocal: the time fits a datetime-local input.
	FromLocal, ToLocal bool
	Zone               string // where From and To are read
	ZoneUnknown        string // a tz sent that is not known here (read as UTC)
	StateChoices       []choice
	Namespaces         []string // the ones the person may use, for the form's suggestions
	Destinations       []string
	Reasons            []keystore.Reason
	Searched           bool
	Problem            string
	Invalid            map[string]bool // input names at fault
	Rows               []searchRow
	NextURL, FirstURL  string
	// BulkURL decides every matching key at once (empty: not offered).
	BulkURL string
}

type choice struct {
	Value, Label string
	Selected     bool
}

type searchRow struct {
	*keystore.Record
	Decide bool // the key waits for a decision this person may make
}

// searchReasons are the reasons a key can stand in, for the form's
// suggestions.
var searchReasons = []keystore.Reason{keystore.ReasonOutcomeUnknown, keystore.ReasonDestinationUnreachable,
	keystore.ReasonDestinationFailed, keystore.ReasonValidationFailed, keystore.ReasonLeaseExpired,
	keystore.ReasonResumeLost, keystore.ReasonAwaitingApproval, keystore.ReasonApprovalRejected}

// search finds keys the way a person looks for them (keystore.Filter): a
// key or a prefix in every namespace the person may use, the holder by a
// part of its name, a state, a time range in the reader's zone; one page at
// a time. Bad input is shown on this page, with everything typed kept.
func (ui *Console) search(c *fiber.Ctx, sess *session) error {
	// A part that cannot be read (a stray %) is left out; the rest is kept.
	q, _ := url.ParseQuery(string(c.Request().URI().QueryString()))
	form := readSearchForm(q)
	loc, known := readerZone(form.TZ)
	if !known {
		form.TZ = "" // read as UTC, and say so
	}
	if form.TZ == "" && (form.From != "" || form.To != "") {
		form.TZ = "UTC" // times shown are read as UTC: the script must not put another zone under them
	}
	p := searchPage{layout: ui.layout(sess, "Search keys"), Form: form, Zone: loc.String(), Reasons: searchReasons}
	if !known {
		p.ZoneUnknown = q.Get("tz")
	}
	p.Form.From, p.FromLocal = shownTime(form.From, loc)
	p.Form.To, p.ToLocal = shownTime(form.To, loc)
	p.StateChoices = stateChoices(form.State)
	ctx := c.UserContext()
	namespaces, err := ui.usableNamespaces(ctx, sess.who)
	if err != nil {
		return err
	}
	p.Namespaces = namespaces
	if p.Destinations, err = ui.usableDestinations(ctx, sess.who); err != nil {
		return err
	}
	if q.Get("search") == "" && q.Get("cursor") == "" {
		return ui.render(c, http.StatusOK, "search", p)
	}
	p.Searched = true
	filter, err := keystore.FilterFromQuery(form.values(), loc)
	if err == nil && filter.Namespace != "" && !sess.who.MayUse(filter.Namespace) {
		err = &errs.Error{Code: errs.Forbidden, Fields: []errs.FieldError{{Field: "namespace", Rule: "may_use"}},
			Message: fmt.Sprintf("%s may not use namespace %q", sess.who.Name, filter.Namespace)}
	}
	var items []*keystore.Record
	next := ""
	if err == nil {
		if filter.Namespace != "" {
			namespaces = []string{filter.Namespace}
		}
		if form.Match == "exact" && filter.KeyPrefix != "" {
			items, err = ui.exactKey(ctx, namespaces, filter)
		} else {
			items, next, err = ui.selectKeys(ctx, namespaces, filter, q.Get("cursor"))
		}
	}
	if err != nil {
		status := problem.Status(errs.CodeOf(err))
		if status >= 500 {
			return err
		}
		p.Problem, p.Invalid = errs.MessageOf(err), invalidInputs(err)
		return ui.render(c, status, "search", p)
	}
	now := ui.now()
	for _, r := range items {
		p.Rows = append(p.Rows, searchRow{Record: r, Decide: sess.who.CanAct() && decidable(r, now)})
	}
	link := form.values()
	link.Set("search", "1")
	p.FirstURL = Prefix + "/keys?" + link.Encode()
	if next != "" {
		link.Set("cursor", next)
		p.NextURL = Prefix + "/keys?" + link.Encode()
	}
	// An exact key is one per namespace: its filter (a prefix) would select more.
	if sess.who.CanAct() && form.Match != "exact" && len(items) > 0 {
		p.BulkURL = Prefix + "/bulk?" + filter.Query().Encode()
	}
	return ui.render(c, http.StatusOK, "search", p)
}

// selectKeys returns a page of the keys f selects in namespaces, walked
// one after the other: the stores' indexes are by namespace, so a key
// prefix is a short walk in each, never a walk of every key. The cursor
// is "<namespace>:<the store's cursor in it>".
func (ui *Console) selectKeys(ctx context.Context, namespaces []string, f keystore.Filter, cursor string) ([]*keystore.Record, string, error) {
	start, inner := 0, ""
	if cursor != "" {
		ns, c, _ := strings.Cut(cursor, ":")
		if start = slices.Index(namespaces, ns); start < 0 {
			return nil, "", errs.InvalidField("cursor", "cursor", "the next-page link is not one this search made (or its namespace has no keys now): search again")
		}
		inner = c
	}
	var out []*keystore.Record
	for i := start; i < len(namespaces); i++ {
		f.Namespace = namespaces[i]
		page, err := keystore.Select(ctx, ui.store, f, inner, searchPageSize-len(out))
		if err != nil {
			return nil, "", err
		}
		out, inner = append(out, page.Items...), ""
		switch {
		case page.NextCursor != "":
			return out, namespaces[i] + ":" + page.NextCursor, nil
		case len(out) >= searchPageSize && i+1 < len(namespaces):
			return out, namespaces[i+1] + ":", nil
		}
	}
	return out, "", nil
}

// exactKey looks the key f.KeyPrefix up in each namespace.
func (ui *Console) exactKey(ctx context.Context, namespaces []string, f keystore.Filter) ([]*keystore.Record, error) {
	var out []*keystore.Record
	for _, ns := range namespaces {
		res, err := ui.store.Lookup(ctx, ns, f.KeyPrefix)
		if err != nil {
			return nil, err
		}
		if r := res.Record; r != nil && r.Key == f.KeyPrefix && f.Match(r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// usableNamespaces are the namespaces that have keys and who may use, in
// order (Counts: the store keeps them counted).
func (ui *Console) usableNamespaces(ctx context.Context, who access.Principal) ([]string, error) {
	counts, err := ui.store.Counts(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for ns, byState := range counts {
		n := 0
		for _, c := range byState {
			n += c
		}
		if n > 0 && who.MayUse(ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (ui *Console) usableDestinations(ctx context.Context, who access.Principal) ([]string, error) {
	bs, err := ui.store.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bs {
		if who.MayUseBreaker(b.Destination) {
			out = append(out, b.Destination)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// stateChoices are the state select's options: any, each state, and what
// was sent if it is none of those (several states from a link, or a wrong
// one), so the form shows what it searched.
func stateChoices(sent string) []choice {
	out := []choice{{Value: "", Label: "any", Selected: sent == ""}}
	found := sent == ""
	for _, s := range keystore.States {
		out = append(out, choice{Value: string(s), Label: string(s), Selected: sent == string(s)})
		found = found || sent == string(s)
	}
	if !found {
		out = append(out, choice{Value: sent, Label: strings.ReplaceAll(sent, ",", " or "), Selected: true})
	}
	return out
}

// invalidInputs names the form's inputs an error is about (the filter's
// field names; a state's is states[i]).
func invalidInputs(err error) map[string]bool {
	var e *errs.Error
	out := map[string]bool{}
	if !errors.As(err, &e) {
		return out
	}
	for _, f := range e.Fields {
		name := f.Field
		switch {
		case strings.HasPrefix(name, "states"):
			name = "state"
		case name == "key": // an exact key the store refuses
			name = "key_prefix"
		}
		out[name] = true
	}
	return out
}
