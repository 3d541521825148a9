package keystore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/errs"
)

// BreakerState is the state of a destination's circuit breaker.
type BreakerState string

const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// Breaker is the persisted circuit breaker of one destination. It is shared
// by every execution that names the destination, which is the memory n8n
// lacks between executions.
type Breaker struct {
	Destination string       `json:"destination"`
	State       BreakerState `json:"state"`
	OpenedAt    *time.Time   `json:"opened_at"`
	ReopensAt   *time.Time   `json:"reopens_at"`
	// ConsecutiveFailures counts the distinct keys whose writes failed
	// since the destination last answered: evidence from many events, not
	// one caller repeating itself (failed).
	ConsecutiveFailures int `json:"consecutive_failures"`
	// FailedKeys are the digests (FailedKeyDigest) of those keys, at most
	// the failure threshold of them, so that a key failing again is not
	// counted again. Digests, not keys: bounded in size, and a breaker
	// shared by every namespace holds no namespace's keys.
	FailedKeys     []string `json:"-"`
	PausedReserves int      `json:"paused_reserves"`
	// Maintenance is the window a person paused the destination for
	// (maintenance.go); nil when the breaker opened by itself or closed.
	Maintenance *Maintenance `json:"maintenance"`
	// Reset is the person who closed the breaker by hand, why and when
	// (DecideResetBreaker). It stays while the breaker stays closed, so
	// the lists can say why writes go through although no probe proved the
	// destination back, and goes when the breaker opens again or a probe
	// closes it.
	Reset *BreakerReset `json:"reset"`
	// The probe let through in half_open, and until when it may hold it.
	ProbeNamespace string     `json:"-"`
	ProbeKey       string     `json:"-"`
	ProbeUntil     *time.Time `json:"-"`
	// Views are the namespaces whose own failures paused their own
	// writes while the destination's breaker stays closed for the others
	// (breaker_view.go). A reader sees the open ones; the API shows a
	// caller those of its namespaces.
	Views []BreakerView `json:"namespace_breakers,omitempty"`
	// SeenNamespaces are the first namespaces that reserved through the
	// destination (at most two): one alone may open the breaker for all.
	SeenNamespaces []string `json:"-"`
	// OpenedBy is the namespace whose failures alone opened the breaker
	// for every namespace (it was the destination's only known user); ""
	// when namespaces agreed, for a hold, or before this was kept. Another
	// namespace's reserve narrows the breaker to OpenedBy's view (demote).
	OpenedBy string `json:"-"`
}

// BreakerReset is a person's reset of a breaker: who, why and when.
type BreakerReset struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// NewBreaker is the closed breaker of a destination nothing has happened to.
func NewBreaker(dest string) *Breaker {
	return &Breaker{Destination: dest, State: BreakerClosed}
}

// Clone returns a deep copy.
func (b *Breaker) Clone() *Breaker {
	c := *b
	c.OpenedAt, c.ReopensAt, c.ProbeUntil = copyTime(b.OpenedAt), copyTime(b.ReopensAt), copyTime(b.ProbeUntil)
	c.FailedKeys = slices.Clone(b.FailedKeys)
	c.SeenNamespaces = slices.Clone(b.SeenNamespaces)
	c.Views = nil
	for _, v := range b.Views {
		c.Views = append(c.Views, v.clone())
	}
	if b.Maintenance != nil {
		m := *b.Maintenance
		c.Maintenance = &m
	}
	if b.Reset != nil {
		r := *b.Reset
		c.Reset = &r
	}
	return &c
}

// admit decides whether a reserve that would start an attempt may go to
// the destination. It mutates b; the caller saves it. When paused it
// returns how long to wait.
//
// A reserve that can wait in line (queue: it carries a resume URL, so it
// parks) never opens a probe: the probe is the catch-up's claim of the
// oldest waiting event (DecideClaimResume), so an event that arrives just
// after the cooldown does not test the destination ahead of events that
// waited through the outage. It parks behind them; when nothing else
// waits, the catch-up claims it as the probe at its commit.
func (b *Breaker) admit(ns, key string, lease time.Duration, queue bool, now time.Time) (ok bool, wait time.Duration) {
	b.see(ns)
	switch b.State {
	case BreakerOpen:
		if now.Before(*b.ReopensAt) {
			b.PausedReserves++
			return false, b.ReopensAt.Sub(now)
		}
		if queue {
			b.PausedReserves++
			return false, 0
		}
		b.State = BreakerHalfOpen
		b.startProbe(ns, key, lease, now)
		return true, 0
	case BreakerHalfOpen:
		// One probe at a time; a probe whose lease ran out is replaced, or
		// the breaker would stay half open forever. The probe's own key
		// passes: a parked key the catch-up runner made the probe
		// (DecideClaimResume) reserves after its execution is resumed.
		if b.ProbeUntil != nil && now.Before(*b.ProbeUntil) && !b.isProbe(ns, key) {
			b.PausedReserves++
			return false, b.ProbeUntil.Sub(now)
		}
		if queue && !b.isProbe(ns, key) {
			b.PausedReserves++
			return false, 0
		}
		b.startProbe(ns, key, lease, now)
		return true, 0
	}
	if v := b.view(ns); v != nil && v.State == BreakerOpen {
		return v.admit(key, lease, queue, now) // paused for ns alone
	}
	return true, 0
}

func (b *Breaker) startProbe(ns, key string, lease time.Duration, now time.Time) {
	b.ProbeNamespace, b.ProbeKey, b.ProbeUntil = ns, key, timePtr(now.Add(lease))
}

// releaseProbe frees the slot of the probe ns/key (the breaker, or ns's
// view, stays half open): the next claim or reserve becomes the probe.
func (b *Breaker) releaseProbe(ns, key string) {
	if b.globalProbe(ns, key) {
		b.ProbeNamespace, b.ProbeKey, b.ProbeUntil = "", "", nil
	}
	if v := b.view(ns); v != nil && v.isProbe(key) {
		v.ProbeKey, v.ProbeUntil = "", nil
	}
}

// isProbe tells whether ns/key is the probe of the breaker or of ns's view.
func (b *Breaker) isProbe(ns, key string) bool {
	if b.globalProbe(ns, key) {
		return true
	}
	v := b.view(ns)
	return v != nil && v.isProbe(key)
}

func (b *Breaker) globalProbe(ns, key string) bool {
	return b.ProbeKey != "" && b.ProbeNamespace == ns && b.ProbeKey == key
}

// succeeded records that the write of key took effect (or got a 4xx: the
// destination answered). In half_open any success proves the destination
// is back; while open only the probe's own late success does, since other
// answers are stragglers from before the outage. It returns the event to
// log, if any.
func (b *Breaker) succeeded(ns, key string, now time.Time) *Event {
	b.ConsecutiveFailures, b.FailedKeys = 0, nil
	b.answered(ns, key, now)
	if b.State == BreakerClosed || (b.State == BreakerOpen && !b.globalProbe(ns, key)) {
		return nil
	}
	ev := &Event{At: now, Kind: EventBreakerClosed, Destination: b.Destination, PausedReserves: b.PausedReserves}
	*b = Breaker{Destination: b.Destination, State: BreakerClosed, SeenNamespaces: b.SeenNamespaces}
	return ev
}

// failed records a failed or ambiguous write of key. In half_open only the
// probe's failure re-opens the breaker: a failure of a request sent before
// the outage says nothing about now. While closed the breaker opens on
// evidence: pol.FailureThreshold distinct keys failed since the
// destination last answered (pol.UnreachableThreshold when this failure
// says nothing got through); a key failing again adds nothing, so one
// caller repeating one event cannot pause every namespace's writes. Nor
// can one namespace inventing keys: its failures open its own view
// (breaker_view.go) until a second namespace agrees. It returns the event
// to log when the breaker opens from closed; a re-open after a failed
// probe is the same outage and is not announced again, and a view's
// opening is the answer to its namespace's reserves (destination_paused).
func (b *Breaker) failed(ns, key string, reason Reason, message string, pol DestinationPolicy, now time.Time) *Event {
	switch reason {
	case ReasonValidationFailed:
		return b.succeeded(ns, key, now) // the destination is up: it judged the data
	case ReasonDestinationUnreachable, ReasonDestinationFailed, ReasonOutcomeUnknown:
	default:
		return nil
	}
	switch b.State {
	case BreakerOpen:
		return nil
	case BreakerHalfOpen:
		if b.globalProbe(ns, key) {
			b.open(pol, now)
		}
		return nil
	}
	if !b.countFailure(ns, key, pol) {
		if v := b.view(ns); v != nil && v.State == BreakerOpen && v.isProbe(key) {
			v.open(pol, now) // its probe failed again: another cooldown
		}
		return nil
	}
	v := b.countView(ns, key, pol)
	threshold := pol.FailureThreshold
	if reason == ReasonDestinationUnreachable {
		threshold = pol.UnreachableThreshold
	}
	if b.ConsecutiveFailures < threshold || b.agreeing() < b.agreementNeeded(ns, pol) {
		if v != nil && (v.isProbe(key) || v.State != BreakerOpen && len(v.FailedKeys) >= threshold) {
			v.open(pol, now)
		}
		return nil
	}
	sole := b.agreeing() <= 1
	b.open(pol, now)
	b.OpenedBy = ""
	if sole {
		b.OpenedBy = ns // this namespace's evidence alone (agreementNeeded 1)
	}
	b.PausedReserves = 0
	return &Event{At: now, Kind: EventBreakerOpened, Destination: b.Destination, Reason: reason,
		Message: message, ReopensAt: copyTime(b.ReopensAt)}
}

// countFailure counts key's failure unless it was counted already; false
// when it was. Only the newest pol.FailureThreshold digests are kept: the
// breaker opens at that many. A breaker written before digests were kept
// has a count without them; its next failures count on from it.
func (b *Breaker) countFailure(ns, key string, pol DestinationPolicy) bool {
	d := FailedKeyDigest(ns, key)
	if slices.Contains(b.FailedKeys, d) {
		return false
	}
	b.ConsecutiveFailures++
	b.FailedKeys = append(b.FailedKeys, d)
	if n := max(pol.FailureThreshold, 1); len(b.FailedKeys) > n {
		b.FailedKeys = slices.Clone(b.FailedKeys[len(b.FailedKeys)-n:])
	}
	return true
}

// FailedKeyDigest names one key among a breaker's failures: the first 8
// bytes of the SHA-256 of namespace and key, in hex. A collision makes
// two keys count once, which errs on the side of not opening.
func FailedKeyDigest(ns, key string) string {
	sum := sha256.Sum256([]byte(ns + "\x00" + key))
	return hex.EncodeToString(sum[:8])
}

func (b *Breaker) open(pol DestinationPolicy, now time.Time) {
	// A failed probe continues the outage that opened the breaker: it
	// keeps its start, so people read how long the destination has been
	// down, not since its last probe. A failed probe after a maintenance
	// window is an outage that begins now: the window is over either way.
	if b.State != BreakerHalfOpen || b.Maintenance != nil || b.OpenedAt == nil {
		b.OpenedAt = timePtr(now)
		// Opened for all when a second namespace agreed: the outage began
		// when the first namespace's own breaker opened.
		for _, v := range b.Views {
			if v.State == BreakerOpen && v.OpenedAt != nil && v.OpenedAt.Before(*b.OpenedAt) {
				b.OpenedAt = copyTime(v.OpenedAt)
			}
		}
	}
	b.Maintenance = nil
	b.Reset = nil
	b.State = BreakerOpen
	b.ReopensAt = timePtr(now.Add(pol.Cooldown))
	b.ProbeUntil = nil
	b.FailedKeys = nil
	b.Views = nil // open for every namespace: no view is needed
	if b.ProbeNamespace != b.OpenedBy {
		b.OpenedBy = "" // a failed probe of another namespace: it agrees
	}
}

// View returns the breaker as a reader sees it at now: an open breaker
// whose cooldown has passed is shown half open (the next reserve probes),
// and of the namespaces' views only the open ones, the same way.
func (b *Breaker) View(now time.Time) Breaker {
	v := *b.Clone()
	if v.State == BreakerOpen && v.ReopensAt != nil && !now.Before(*v.ReopensAt) {
		v.State = BreakerHalfOpen
	}
	open := v.Views[:0]
	for _, nv := range v.Views {
		if nv.State != BreakerOpen {
			continue
		}
		if nv.ReopensAt != nil && !now.Before(*nv.ReopensAt) {
			nv.State = BreakerHalfOpen
		}
		open = append(open, nv)
	}
	v.Views = open
	if len(v.Views) == 0 {
		v.Views = nil
	}
	return v
}

// DecideResetBreaker closes a destination's breaker by a person's
// decision (by, for reason): the next reserve naming it goes through at
// once. exists is false when the destination has no breaker state. Who
// and why stay on the breaker (Reset) and go to the event log with the
// closing (ResetEvent), so whoever heard of the opening hears who closed
// it and why; nothing claims the destination is back, no write proved it.
func DecideResetBreaker(b *Breaker, exists bool, by, reason string, now time.Time) (Step, error) {
	by, reason = strings.TrimSpace(by), strings.TrimSpace(reason)
	var v violations
	if by == "" || utf8.RuneCountInString(by) > MaxByLength || strings.IndexFunc(by, unicode.IsControl) >= 0 {
		v.field("by", "required,max=128", "by is required: the person who resets the breaker (at most 128 characters, one line)")
	}
	if reason == "" || utf8.RuneCountInString(reason) > MaxNoteLength || !utf8.ValidString(reason) {
		v.field("reason", "required,max=2000", "reason is required: why the breaker may close although no probe got through (at most 2000 characters)")
	}
	if err := v.err(); err != nil {
		return Step{}, err
	}
	if !exists {
		return Step{}, errs.Errorf(errs.NotFound, "destination %q has no breaker", b.Destination)
	}
	if b.State == BreakerClosed && b.ConsecutiveFailures == 0 && len(b.Views) == 0 {
		return Step{Breaker: b.Clone()}, nil
	}
	at := now.UTC().Truncate(time.Millisecond)
	// Closed for every namespace, its views too.
	next := &Breaker{Destination: b.Destination, State: BreakerClosed, Reset: &BreakerReset{By: by, Reason: reason, At: at},
		SeenNamespaces: slices.Clone(b.SeenNamespaces)}
	return Step{Breaker: next, Events: []Event{ResetEvent(b, by, reason, now)}}, nil
}

// ResetEvent is the breaker_closed event of a person's reset: Owner names
// who (as a resolved key's event does), Message says it in words.
func ResetEvent(b *Breaker, by, reason string, now time.Time) Event {
	return Event{At: now, Kind: EventBreakerClosed, Destination: b.Destination, PausedReserves: b.PausedReserves,
		Owner: by, Message: truncate("reset by "+by+" because "+reason, MaxMessageLength)}
}

// ResetOf reads a person's reset from a breaker_closed event: who and
// why; ok is false for a closing by a probe that got through. Events
// written before resets had a reason name only who ("reset by …").
func ResetOf(ev Event) (by, reason string, ok bool) {
	if ev.Kind != EventBreakerClosed {
		return "", "", false
	}
	if ev.Owner != "" {
		reason, _ = strings.CutPrefix(ev.Message, "reset by "+ev.Owner+" because ")
		return ev.Owner, reason, true
	}
	if by, ok := strings.CutPrefix(ev.Message, "reset by "); ok {
		return strings.TrimSpace(by), "", true
	}
	return "", "", false
}

// Admits tells whether namespace ns may use the destination: name it on
// a reserve, report its failures, move its breaker. A destination limited
// to namespaces (destinations.<name>.namespaces) admits only those; one
// without a limit admits every namespace.
func (dp DestinationPolicy) Admits(ns string) bool {
	return len(dp.Namespaces) == 0 || slices.Contains(dp.Namespaces, ns)
}

// refuseDestination is the answer to a namespace that may not use dest:
// forbidden. Nothing is recorded, so a caller limited to one namespace
// cannot pause another's destination. The namespaces that may use it are
// left out: any reserve token would learn other teams' namespaces from
// them (the operator finds them in destinations.<name>.namespaces).
func refuseDestination(ns, dest string, _ DestinationPolicy) error {
	return &errs.Error{Code: errs.Forbidden,
		Message: fmt.Sprintf("destination %s is limited to other namespaces (destinations.%s.namespaces); namespace %s may not use it or report its failures; nothing changed",
			dest, dest, ns),
		Fields: []errs.FieldError{{Field: "destination", Rule: "namespaces"}}}
}
