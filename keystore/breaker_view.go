package keystore

import (
	"encoding/json"
	"slices"
	"time"
)

// One caller must not pause what other teams write through. A reserve
// token limited to one namespace can invent keys and fail them, so the
// failures of one namespace are evidence about that namespace's writes,
// not about everyone's:
//
//   - a namespace's own failures (the same thresholds) open a view of the
//     breaker for that namespace alone (BreakerView): its reserves are
//     paused and probe as an open breaker's do; the other namespaces keep
//     writing;
//   - the destination's breaker opens for every namespace when the
//     failures since the destination last answered reach the threshold and
//     come from at least two namespaces (an open view counts as its
//     namespace agreeing), or from one namespace when it is the only one
//     that uses the destination: destinations.<name>.namespaces names it
//     alone, or none is configured and no other namespace has reserved
//     through the destination (SeenNamespaces) — a destination one team
//     uses behaves as before;
//   - an operator's maintenance hold and a person's reset apply to every
//     namespace, as before.

// PausedNamespace is Result.PausedFor of a reserve paused by its
// namespace's own view.
const PausedNamespace = "namespace"

// MaxBreakerViews bounds the views a breaker keeps: the failures of a
// namespace beyond them count for the destination only (its breaker
// opens once two namespaces agree, as always).
const MaxBreakerViews = 64

// maxSeenNamespaces is how many of the namespaces that reserved through a
// destination a breaker keeps: two tell that it is shared.
const maxSeenNamespaces = 2

// BreakerView is a destination's breaker as one namespace sees it while
// the evidence against the destination comes from that namespace alone.
// Stored while it counts failures (closed) or is open; a reader sees only
// open ones (Breaker.View), half_open once the cooldown passed.
type BreakerView struct {
	Namespace      string       `json:"namespace"`
	State          BreakerState `json:"state"`
	OpenedAt       *time.Time   `json:"opened_at"`
	ReopensAt      *time.Time   `json:"reopens_at"`
	PausedReserves int          `json:"paused_reserves"`
	// FailedKeys are the digests of the namespace's keys counted since the
	// destination last answered (closed view only).
	FailedKeys []string `json:"-"`
	// The probe let through after the cooldown, and until when.
	ProbeKey   string     `json:"-"`
	ProbeUntil *time.Time `json:"-"`
}

func (v BreakerView) clone() BreakerView {
	v.OpenedAt, v.ReopensAt, v.ProbeUntil = copyTime(v.OpenedAt), copyTime(v.ReopensAt), copyTime(v.ProbeUntil)
	v.FailedKeys = slices.Clone(v.FailedKeys)
	return v
}

// view returns ns's view of b (nil: none), to change in place.
func (b *Breaker) view(ns string) *BreakerView {
	for i := range b.Views {
		if b.Views[i].Namespace == ns {
			return &b.Views[i]
		}
	}
	return nil
}

// StateFor is the breaker as namespace ns sees it at now: the
// destination's state while it is not closed, else ns's view's.
func (b *Breaker) StateFor(ns string, now time.Time) BreakerState {
	if s := b.View(now).State; s != BreakerClosed {
		return s
	}
	if v := b.view(ns); v != nil && v.State == BreakerOpen {
		if v.ReopensAt != nil && !now.Before(*v.ReopensAt) {
			return BreakerHalfOpen
		}
		return BreakerOpen
	}
	return BreakerClosed
}

// reopensAtFor is when ns's next probe may go: the destination's cooldown
// or, while it is closed, ns's view's (nil: none).
func (b *Breaker) reopensAtFor(ns string) *time.Time {
	if b.State != BreakerClosed {
		return b.ReopensAt
	}
	if v := b.view(ns); v != nil && v.State == BreakerOpen {
		return v.ReopensAt
	}
	return nil
}

// see notes that ns reserved through the destination (the first
// maxSeenNamespaces of them are kept).
func (b *Breaker) see(ns string) {
	if len(b.SeenNamespaces) < maxSeenNamespaces && !slices.Contains(b.SeenNamespaces, ns) {
		b.SeenNamespaces = append(b.SeenNamespaces, ns)
	}
}

// agreementNeeded is how many namespaces must agree before failures open
// the breaker for every namespace: one when ns is the only namespace
// known to use the destination, else two.
func (b *Breaker) agreementNeeded(ns string, pol DestinationPolicy) int {
	known := pol.Namespaces
	if len(known) == 0 {
		known = b.SeenNamespaces
	}
	if len(known) == 0 || len(known) == 1 && known[0] == ns {
		return 1
	}
	return 2
}

// agreeing counts the namespaces whose evidence stands: failures counted
// since the destination last answered, or a view open.
func (b *Breaker) agreeing() int {
	n := 0
	for _, v := range b.Views {
		if v.State == BreakerOpen || len(v.FailedKeys) > 0 {
			n++
		}
	}
	return n
}

// countView counts key's failure in ns's view (made when missing; nil
// when MaxBreakerViews are kept already).
func (b *Breaker) countView(ns, key string, pol DestinationPolicy) *BreakerView {
	v := b.view(ns)
	if v == nil {
		if len(b.Views) >= MaxBreakerViews {
			return nil
		}
		b.Views = append(b.Views, BreakerView{Namespace: ns, State: BreakerClosed})
		v = &b.Views[len(b.Views)-1]
	}
	if v.State == BreakerClosed {
		v.FailedKeys = append(v.FailedKeys, FailedKeyDigest(ns, key))
		if n := max(pol.FailureThreshold, 1); len(v.FailedKeys) > n {
			v.FailedKeys = slices.Clone(v.FailedKeys[len(v.FailedKeys)-n:])
		}
	}
	return v
}

func (v *BreakerView) open(pol DestinationPolicy, now time.Time) {
	if v.State != BreakerOpen {
		v.OpenedAt, v.PausedReserves = timePtr(now), 0
	}
	v.State = BreakerOpen
	v.ReopensAt = timePtr(now.Add(pol.Cooldown))
	v.FailedKeys, v.ProbeKey, v.ProbeUntil = nil, "", nil
}

func (v *BreakerView) isProbe(key string) bool { return v.ProbeKey != "" && v.ProbeKey == key }

// admit is Breaker.admit for an open view: paused during the cooldown,
// then one probe at a time (its own key passes again).
func (v *BreakerView) admit(key string, lease time.Duration, queue bool, now time.Time) (bool, time.Duration) {
	if now.Before(*v.ReopensAt) {
		v.PausedReserves++
		return false, v.ReopensAt.Sub(now)
	}
	if v.ProbeUntil != nil && now.Before(*v.ProbeUntil) && !v.isProbe(key) {
		v.PausedReserves++
		return false, v.ProbeUntil.Sub(now)
	}
	if queue && !v.isProbe(key) {
		v.PausedReserves++ // it parks: the probe is the oldest waiting event (Breaker.admit)
		return false, 0
	}
	v.ProbeKey, v.ProbeUntil = key, timePtr(now.Add(lease))
	return true, 0
}

// answered records that the destination answered a write of ns's key:
// nobody's failures count any more, and ns's view closes when this was
// its probe or its cooldown passed (as a half-open breaker closes on any
// success). Other namespaces' open views stay: they probe for themselves.
func (b *Breaker) answered(ns, key string, now time.Time) {
	views := b.Views[:0]
	for _, v := range b.Views {
		v.FailedKeys = nil
		if v.State != BreakerOpen {
			continue
		}
		if v.Namespace == ns && (v.isProbe(key) || !now.Before(*v.ReopensAt)) {
			continue
		}
		views = append(views, v)
	}
	b.Views = views
	if len(b.Views) == 0 {
		b.Views = nil
	}
}

// demote narrows a breaker that one namespace's failures alone opened for
// every namespace (OpenedBy: it was the destination's only known user) to
// that namespace's view, when another namespace reserves through the
// destination: the breaker did not know the destination is shared (a new
// destination, or one no second namespace had reserved through since the
// upgrade), and one caller must not pause another's writes. The narrowing
// is logged as breaker_narrowed, not naming the namespace (the event log
// is every team's): never breaker_closed, which would tell Slack the
// destination is back. A hold (OpenedBy "") is never narrowed.
func (b *Breaker) demote(ns string, now time.Time) *Event {
	if b.State == BreakerClosed || b.OpenedBy == "" || b.OpenedBy == ns || b.Maintenance != nil {
		return nil
	}
	v := BreakerView{Namespace: b.OpenedBy, State: BreakerOpen, OpenedAt: copyTime(b.OpenedAt), ReopensAt: copyTime(b.ReopensAt),
		PausedReserves: b.PausedReserves}
	if b.ProbeNamespace == b.OpenedBy {
		v.ProbeKey, v.ProbeUntil = b.ProbeKey, copyTime(b.ProbeUntil)
	}
	if v.ReopensAt == nil { // a half-open breaker read from an old record
		v.ReopensAt = timePtr(now)
	}
	ev := &Event{At: now, Kind: EventBreakerNarrowed, Destination: b.Destination, PausedReserves: b.PausedReserves,
		Message: "open for one namespace alone, by its own failures: other namespaces write through the destination again"}
	*b = Breaker{Destination: b.Destination, State: BreakerClosed, SeenNamespaces: b.SeenNamespaces, Views: []BreakerView{v}}
	return ev
}

// viewJSON is a view as the stores keep it: every field.
type viewJSON struct {
	Namespace  string     `json:"ns"`
	State      string     `json:"state"`
	OpenedAt   *time.Time `json:"opened_at,omitempty"`
	ReopensAt  *time.Time `json:"reopens_at,omitempty"`
	Paused     int        `json:"paused,omitempty"`
	FailedKeys []string   `json:"failed,omitempty"`
	ProbeKey   string     `json:"probe_key,omitempty"`
	ProbeUntil *time.Time `json:"probe_until,omitempty"`
}

// EncodeViews is the stored form of a breaker's views (nil: none), the
// same on both stores.
func EncodeViews(vs []BreakerView) []byte {
	if len(vs) == 0 {
		return nil
	}
	out := make([]viewJSON, len(vs))
	for i, v := range vs {
		out[i] = viewJSON{v.Namespace, string(v.State), v.OpenedAt, v.ReopensAt, v.PausedReserves, v.FailedKeys, v.ProbeKey, v.ProbeUntil}
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic("breaker views always encode: " + err.Error())
	}
	return b
}

// DecodeViews reads EncodeViews' form; empty is none.
func DecodeViews(b []byte) ([]BreakerView, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var in []viewJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	var out []BreakerView
	for _, v := range in {
		out = append(out, BreakerView{Namespace: v.Namespace, State: BreakerState(v.State), OpenedAt: utcPtr(v.OpenedAt),
			ReopensAt: utcPtr(v.ReopensAt), PausedReserves: v.Paused, FailedKeys: v.FailedKeys, ProbeKey: v.ProbeKey, ProbeUntil: utcPtr(v.ProbeUntil)})
	}
	return out, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
