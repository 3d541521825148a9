package keystore

import (
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/errs"
)

// MaxMaintenance bounds a maintenance window.
const MaxMaintenance = 30 * 24 * time.Hour

// Maintenance is a window a person paused a destination for: who, why,
// since when and until when. It is kept on the breaker so that the
// console and GET /v1/destinations show it; it ends with the window (the
// probe after it closes the breaker, or fails and the outage is an
// ordinary one) or when a person ends it early (DecideEndHold).
type Maintenance struct {
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	SetAt  time.Time `json:"set_at"`
	Until  time.Time `json:"until"`
}

// EventMaintenanceEnded: a person ended a maintenance window early (Owner
// who, Message "ended by … because …"), for the audit list. notify sends
// nothing for it: the catch-up's probe and the outage's message follow.
const EventMaintenanceEnded EventKind = "maintenance_ended"

// MaintenanceOf reads a person's maintenance window from the event log:
// set (a breaker_opened naming who, "maintenance window by … until …:
// reason") or ended early (maintenance_ended). ok is false for any
// other event, an outage's opening among them.
func MaintenanceOf(ev Event) (by, reason string, ended, ok bool) {
	switch {
	case ev.Kind == EventBreakerOpened && ev.Owner != "":
		rest, found := strings.CutPrefix(ev.Message, "maintenance window by "+ev.Owner+" until ")
		if !found {
			return "", "", false, false
		}
		_, reason, _ = strings.Cut(rest, ": ")
		return ev.Owner, reason, false, true
	case ev.Kind == EventMaintenanceEnded:
		reason, _ = strings.CutPrefix(ev.Message, "ended by "+ev.Owner+" because ")
		return ev.Owner, reason, true, true
	}
	return "", "", false, false
}

// DecideHoldDestination decides a maintenance window: a person (by)
// pauses a destination until until, for reason. The breaker opens with
// its cooldown ending at until, so reserves with resume_url park and are
// caught up after the window exactly as after an outage (park.go). The
// window, who set it and why go to the event log (breaker_opened).
func DecideHoldDestination(b *Breaker, by, reason string, until, now time.Time) (Step, error) {
	by, reason = strings.TrimSpace(by), strings.TrimSpace(reason)
	if by == "" || utf8.RuneCountInString(by) > MaxByLength || strings.IndexFunc(by, unicode.IsControl) >= 0 {
		return Step{}, errs.InvalidField("by", "required,max=128", "by is required: the person who sets the maintenance window (at most 128 characters, one line)")
	}
	if reason == "" || utf8.RuneCountInString(reason) > MaxNoteLength || !utf8.ValidString(reason) {
		return Step{}, errs.InvalidField("reason", "required,max=2000", "reason is required: why the destination is paused (at most 2000 characters)")
	}
	if !until.After(now) || until.Sub(now) > MaxMaintenance {
		return Step{}, errs.InvalidField("until", "future,max=720h", "until must be in the future and at most 30 days ahead")
	}
	next := b.Clone()
	next.State = BreakerOpen
	next.OpenedAt = timePtr(now)
	next.ReopensAt = timePtr(until.UTC().Truncate(time.Millisecond))
	next.ProbeNamespace, next.ProbeKey, next.ProbeUntil = "", "", nil
	next.PausedReserves = 0
	next.Reset = nil
	next.Views, next.OpenedBy = nil, "" // a hold pauses every namespace, whoever asks
	next.Maintenance = &Maintenance{By: by, Reason: reason, SetAt: now.UTC().Truncate(time.Millisecond), Until: *next.ReopensAt}
	msg := "maintenance window by " + by + " until " + next.ReopensAt.Format(time.RFC3339) + ": " + reason
	ev := Event{At: now, Kind: EventBreakerOpened, Destination: b.Destination, Owner: by, Message: truncate(msg, MaxMessageLength), ReopensAt: copyTime(next.ReopensAt)}
	return Step{Breaker: next, Events: []Event{ev}}, nil
}

// DecideEndHold ends the maintenance window of a destination early, by a
// person (by) for reason: its cooldown ends now, so the catch-up resumes
// one parked execution as the probe and the rest follow when it
// completes, exactly as after an outage. A destination without a window
// is a conflict (a breaker opened by an outage is reset instead). Who and
// why go to the event log (maintenance_ended).
func DecideEndHold(b *Breaker, by, reason string, now time.Time) (Step, error) {
	by, reason = strings.TrimSpace(by), strings.TrimSpace(reason)
	if by == "" || utf8.RuneCountInString(by) > MaxByLength || strings.IndexFunc(by, unicode.IsControl) >= 0 {
		return Step{}, errs.InvalidField("by", "required,max=128", "by is required: the person who ends the maintenance window (at most 128 characters, one line)")
	}
	if reason == "" || utf8.RuneCountInString(reason) > MaxNoteLength || !utf8.ValidString(reason) {
		return Step{}, errs.InvalidField("reason", "required,max=2000", "reason is required: why the window ends early (at most 2000 characters)")
	}
	if b.Maintenance == nil || b.State == BreakerClosed {
		return Step{}, errs.Errorf(errs.Conflict, "destination %q has no maintenance window to end", b.Destination)
	}
	next := b.Clone()
	next.Maintenance = nil
	if next.State == BreakerOpen && (next.ReopensAt == nil || now.Before(*next.ReopensAt)) {
		next.ReopensAt = timePtr(now)
	}
	ev := Event{At: now, Kind: EventMaintenanceEnded, Destination: b.Destination, Owner: by, Message: truncate("ended by "+by+" because "+reason, MaxMessageLength)}
	return Step{Breaker: next, Events: []Event{ev}}, nil
}
