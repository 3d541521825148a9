package keystore

import (
	"context"
	"net/url"
	"strings"
	"time"
)

// Filter selects keys the way a person looks for them during an incident:
// every field is optional and the fields combine with AND. It serves the
// console's search, the bulk decisions (BulkResolveRequest) and Slack's
// "open in the console" links, so all three select the same keys.
type Filter struct {
	// Namespace: empty means every namespace the caller may use.
	Namespace   string  `json:"namespace" validate:"omitempty,namespace"`
	Destination string  `json:"destination" validate:"max=128,utf8,no_control"`
	States      []State `json:"states" validate:"max=5,dive,oneof=reserved completed failed unknown parked"`
	Reason      Reason  `json:"reason" validate:"max=64,utf8,no_control"`
	// Holder: a part of the lease holder's name (the n8n workflow and
	// execution that held the key), case-insensitive.
	Holder string `json:"holder" validate:"max=128,utf8,no_control"`
	// KeyPrefix: keys that begin with it, in any namespace the filter covers.
	KeyPrefix string `json:"key_prefix" validate:"max_bytes=255,utf8"`
	// Text: a part of the key, case-insensitive.
	Text string `json:"text" validate:"max=255,utf8,no_control"`
	// From and To bound the record's last change (UpdatedAt): From <= t < To;
	// zero means unbounded.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Normalize checks the filter and trims its text fields; every broken field
// is reported in one error.
func (f Filter) Normalize() (Filter, error) {
	f.Namespace = strings.TrimSpace(f.Namespace)
	f.Destination = strings.TrimSpace(f.Destination)
	f.Holder = strings.TrimSpace(f.Holder)
	f.Text = strings.TrimSpace(f.Text)
	var v violations
	v.check(f)
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		v.field("to", "gtfield=from", "the end of the time range must be after its start")
	}
	return f, v.err()
}

// Empty reports whether the filter selects every key: a search may, a bulk
// decision may not (BulkResolveRequest.Normalize).
func (f Filter) Empty() bool {
	return f.Namespace == "" && f.Destination == "" && len(f.States) == 0 && f.Reason == "" &&
		f.Holder == "" && f.KeyPrefix == "" && f.Text == "" && f.From.IsZero() && f.To.IsZero()
}

// Match reports whether r is selected by f (f normalized).
func (f Filter) Match(r *Record) bool {
	switch {
	case f.Namespace != "" && r.Namespace != f.Namespace,
		f.Destination != "" && r.Destination != f.Destination,
		len(f.States) > 0 && !containsState(f.States, r.State),
		f.Reason != "" && r.Reason != f.Reason,
		f.Holder != "" && !containsFold(r.Owner, f.Holder),
		f.KeyPrefix != "" && !strings.HasPrefix(r.Key, f.KeyPrefix),
		f.Text != "" && !containsFold(r.Key, f.Text),
		!f.From.IsZero() && r.UpdatedAt.Before(f.From),
		!f.To.IsZero() && !r.UpdatedAt.Before(f.To):
		return false
	}
	return true
}

// Query is the filter as URL query parameters, the same names
// FilterFromQuery reads: console links, Slack's "open in the console"
// buttons and the CLI all spell a selection this way.
func (f Filter) Query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("namespace", f.Namespace)
	set("destination", f.Destination)
	for _, s := range f.States {
		q.Add("state", string(s))
	}
	set("reason", string(f.Reason))
	set("holder", f.Holder)
	set("key_prefix", f.KeyPrefix)
	set("text", f.Text)
	if !f.From.IsZero() {
		q.Set("from", f.From.UTC().Format(time.RFC3339))
	}
	if !f.To.IsZero() {
		q.Set("to", f.To.UTC().Format(time.RFC3339))
	}
	return q
}

// FilterFromQuery reads a filter from URL query parameters (Query's names).
// Times are RFC 3339, or a browser's datetime-local value
// ("2006-01-02T15:04") read in loc (nil: UTC). The filter is normalized;
// every broken field is reported in one error, and the filter read so far
// is returned with it so a page can show the input back.
func FilterFromQuery(q url.Values, loc *time.Location) (Filter, error) {
	f := Filter{
		Namespace: q.Get("namespace"), Destination: q.Get("destination"), Reason: Reason(q.Get("reason")),
		Holder: q.Get("holder"), KeyPrefix: q.Get("key_prefix"), Text: q.Get("text"),
	}
	for _, s := range q["state"] {
		if s != "" {
			f.States = append(f.States, State(s))
		}
	}
	if loc == nil {
		loc = time.UTC
	}
	var v violations
	readTime := func(name string) time.Time {
		raw := strings.TrimSpace(q.Get(name))
		if raw == "" {
			return time.Time{}
		}
		if t, err := time.Parse(time.RFC3339, raw); err == nil {
			return t
		}
		for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
			if t, err := time.ParseInLocation(layout, raw, loc); err == nil {
				return t
			}
		}
		v.field(name, "datetime", name+" must be a time like 2026-12-01T14:30 or 2026-12-01T14:30:00Z")
		return time.Time{}
	}
	f.From, f.To = readTime("from"), readTime("to")
	if err := v.err(); err != nil {
		return f, err
	}
	return f.Normalize()
}

func containsState(states []State, s State) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

func containsFold(s, part string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(part))
}

// Selector is the part of Store that selects by a Filter through the
// store's own indexes.
type Selector interface {
	Select(ctx context.Context, f Filter, cursor string, limit int) (Page, error)
}

// Select returns up to limit records matched by f (normalized first), and
// the cursor of the next page.
func Select(ctx context.Context, s Selector, f Filter, cursor string, limit int) (Page, error) {
	f, err := f.Normalize()
	if err != nil {
		return Page{}, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	return s.Select(ctx, f, cursor, limit)
}

// BulkResolveRequest is one person's decision about every key a filter
// selects, with one reason. Each key's history names the bulk action (ID)
// and the person.
type BulkResolveRequest struct {
	Filter     Filter `json:"filter"`
	Resolution State  `json:"resolution" validate:"required,oneof=completed failed"`
	By         string `json:"by" validate:"required,max=128,utf8,no_control,no_format"`
	Note       string `json:"note" validate:"required,max=2000,utf8"`
	ResultRef  string `json:"result_ref" validate:"max=512,utf8,no_control"`
	Final      bool   `json:"final"`
	// Rerun, with resolution failed: each key's execution that waits at
	// its re-run gate is re-run (rerun.go); a key with none is skipped.
	Rerun bool `json:"rerun"`
	// ID names the bulk action in every key's history; empty: one is made.
	ID string `json:"id" validate:"max=64,utf8,no_control"`
	// DryRun counts what would be decided and changes nothing.
	DryRun bool `json:"dry_run"`
}

// BulkResult says what a bulk decision did (or, dry, would do).
type BulkResult struct {
	ID      string `json:"id"`
	Matched int    `json:"matched"` // keys the filter selected
	Decided int    `json:"decided"` // keys this action decided (dry run: would decide)
	// Skipped counts matched keys a decision does not apply to, by why
	// (a live lease, awaiting approval, already decided, completed).
	Skipped map[string]int `json:"skipped"`
	DryRun  bool           `json:"dry_run"`
}

// BulkResolver is the part of Store that decides a bulk action
// (Operations.ResolveMany: in batches of BulkBatch keys, each one
// transaction of the store).
type BulkResolver interface {
	ResolveMany(ctx context.Context, req BulkResolveRequest) (BulkResult, error)
	// BulkActions returns the actions the store keeps under ids; an id it
	// does not keep is left out.
	BulkActions(ctx context.Context, ids []string) (map[string]BulkAction, error)
}

// ResolveMany decides every key req.Filter selects (req normalized
// first: an empty filter is refused). A run that writes first claims its
// id (DecideBulkAction: the same id with other content is a conflict). A
// key whose state a resolution does not apply to is skipped and counted by
// why (DecideBulkResolve), never an error of the whole action.
func ResolveMany(ctx context.Context, s BulkResolver, req BulkResolveRequest) (BulkResult, error) {
	req, err := req.Normalize()
	if err != nil {
		return BulkResult{}, err
	}
	return s.ResolveMany(ctx, req)
}
