package notify

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// One message per outage of a destination: posted when its breaker opens,
// then edited in place (chat.update) as events park, when the breaker
// closes and when every parked event is resumed. The decisions are the
// pure functions parkedSeen, parkedLostSeen and breakerClosed.

// Parking is what notify reads of the keystore about parked events
// (keystore's stores satisfy it): how many wait per destination, how many
// n8n woke whose executions have not reserved again, and which
// destinations have a breaker.
type Parking interface {
	ParkedCounts(ctx context.Context) (map[string]int, error)
	WokenCounts(ctx context.Context) (map[string]int, error)
	Destinations(ctx context.Context) ([]keystore.Breaker, error)
}

// leftCounts are the events of each destination an outage still waits
// for: parked ones and woken ones. A woken execution may yet go silent
// and be lost, so the outage is not caught up until it reserved again.
func leftCounts(ctx context.Context, p Parking) (map[string]int, error) {
	parked, err := p.ParkedCounts(ctx)
	if err != nil {
		return nil, err
	}
	woken, err := p.WokenCounts(ctx)
	if err != nil {
		return nil, err
	}
	for dest, n := range woken {
		parked[dest] += n
	}
	return parked, nil
}

// parkedLookEvery is how often the parked counts are read for the outage
// messages; Slack sees a change at most every half group window.
const parkedLookEvery = 5 * time.Second

// outageOf returns the newest outage message of dest while its outage is
// not over (nil: none).
func (s *Service) outageOf(ctx context.Context, dest string) (*Record, error) {
	rs, err := s.outbox.AboutDestination(ctx, dest, 1)
	if err != nil || len(rs) == 0 || rs[0].Kind != KindBreakerOpened {
		return nil, err
	}
	return rs[0], nil
}

// foldIntoOutage edits the outage message of ev's destination for a
// closing breaker or a lost parked execution. edited: the message tells
// it (now or, for an event read again after a crash, already).
func (s *Service) foldIntoOutage(ctx context.Context, ev keystore.Event) (edited bool, err error) {
	cur, err := s.outageOf(ctx, ev.Destination)
	if err != nil || cur == nil {
		return false, err
	}
	if cur.OutageSeq >= ev.Seq {
		return true, nil
	}
	if ev.Kind == keystore.EventCaughtUp {
		return s.catchUpReported(ctx, cur, ev)
	}
	lateLoss := ev.Kind == keystore.EventParkedLost && cur.SupersededAt == nil // a loss found after the catch-up still counts
	if (!cur.outageOpen() && !lateLoss) || (ev.Kind == keystore.EventBreakerClosed && cur.ClosedAt != nil) {
		return false, nil
	}
	if ev.Kind == keystore.EventBreakerOpened {
		return s.supersede(ctx, cur, ev)
	}
	parked := 0
	if ev.Kind == keystore.EventBreakerClosed && s.opts.Parking != nil {
		// What waits at the close is what the catch-up resumes.
		if counts, err := leftCounts(ctx, s.opts.Parking); err == nil {
			parked = counts[ev.Destination]
		}
	}
	now := s.now()
	at := ev.At
	if at.IsZero() {
		at = now
	}
	_, err = s.outbox.Update(ctx, cur.ID, func(x *Record) {
		var next *Record
		if ev.Kind == keystore.EventBreakerClosed {
			by, reason, _ := keystore.ResetOf(ev)
			if next = breakerClosed(x, ev.Seq, by, ev.PausedReserves, parked, at, now); next != nil && by != "" {
				next.ResetReason = reason
			}
		} else {
			next = parkedLostSeen(x, ev.Seq, now, s.cfg.GroupWindow)
		}
		if next != nil {
			*x = *next
			edited = true
		}
	})
	return edited, err
}

// catchUpReported folds a catch-up's report (keystore.EventCaughtUp) into
// the outage's message: its took is the message's. A report while events
// of the destination still wait (another guard's catch-up is not over)
// is left out: the last guard's report, or the parked counts, close it;
// so is a report of a catch-up that began before the outage opened.
func (s *Service) catchUpReported(ctx context.Context, cur *Record, ev keystore.Event) (edited bool, err error) {
	if !ev.At.IsZero() && ev.At.Add(-max(ev.Took, 0)).Before(cur.FirstAt) {
		// Its catch-up began before this outage opened (the destination
		// failed again mid catch-up, and the worker counts from the first
		// close): its took is not this outage's; the parked counts close it.
		return false, nil
	}
	if s.opts.Parking != nil {
		if counts, err := leftCounts(ctx, s.opts.Parking); err == nil && counts[ev.Destination] > 0 {
			return false, nil
		}
	}
	now := s.now()
	_, err = s.outbox.Update(ctx, cur.ID, func(x *Record) {
		if next := catchUpReported(x, ev.Seq, ev.Took, now); next != nil {
			*x, edited = *next, true
		}
	})
	return edited, err
}

// supersede marks the outage of cur as overtaken by the one ev opens (the
// caller adds the new message after).
func (s *Service) supersede(ctx context.Context, cur *Record, ev keystore.Event) (bool, error) {
	now := s.now()
	at := cmpTime(ev.At, now)
	edited := false
	_, err := s.outbox.Update(ctx, cur.ID, func(x *Record) {
		if next := outageSuperseded(x, ev.Seq, at, now); next != nil {
			*x, edited = *next, true
		}
	})
	return edited, err
}

func cmpTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// trackOutages folds the parked counts into the outage messages still
// open: the count while the breaker is open, and the end of the catch-up
// once nothing waits. It reads the keystore, never inside an outbox
// transaction.
func (s *Service) trackOutages(ctx context.Context) {
	if s.opts.Parking == nil {
		return
	}
	now := s.now()
	if now.Sub(s.lastParkedLook) < parkedLookEvery && !s.lastParkedLook.IsZero() {
		return
	}
	s.lastParkedLook = now
	counts, err := leftCounts(ctx, s.opts.Parking)
	if err != nil {
		return // the catch-up runner says so
	}
	brs, err := s.opts.Parking.Destinations(ctx)
	if err != nil {
		return
	}
	for _, b := range brs {
		cur, err := s.outageOf(ctx, b.Destination)
		if err != nil || cur == nil || !cur.outageOpen() {
			continue
		}
		n := counts[b.Destination]
		if parkedSeen(cur, n, now, s.cfg.GroupWindow) == nil {
			continue // nothing to show: no write
		}
		if _, err := s.outbox.Update(ctx, cur.ID, func(x *Record) {
			if next := parkedSeen(x, n, now, s.cfg.GroupWindow); next != nil {
				*x = *next
			}
		}); err != nil {
			s.log.Warn("updating an outage message failed", "destination", b.Destination, "err", err)
		}
	}
}

// parkedKey is what the message about a parked key shows of its n8n
// execution: the id in its resume URL (/webhook-waiting/<id>) and n8n's
// executions page on the same host. The resume URL itself is never shown:
// whoever has it can wake the execution.
func (s *Service) parkedKey(ctx context.Context, ev keystore.Event) ParkedKey {
	var p ParkedKey
	if s.opts.Keys == nil {
		return p
	}
	res, err := s.opts.Keys.Lookup(ctx, ev.Namespace, ev.Key)
	if err != nil || res.Record == nil {
		return p
	}
	if t := res.Record.WaitingSince(); t != nil {
		at := *t
		p.ParkedAt = &at
	}
	p.WaitingExecution, p.ExecutionsURL = executionOfResumeURL(res.Record.ResumeURL)
	return p
}

// executionOfResumeURL reads the execution id of an n8n resume URL
// (…/webhook-waiting/<id>[/suffix]) and the link to n8n's executions on
// that host (…/executions). Either is "" when the URL does not tell.
func executionOfResumeURL(resume string) (id, executions string) {
	u, err := url.Parse(strings.TrimSpace(resume))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", ""
	}
	for _, root := range []string{"/webhook-waiting/", "/form-waiting/"} {
		i := strings.Index(u.Path, root)
		if i < 0 {
			continue
		}
		id, _, _ = strings.Cut(u.Path[i+len(root):], "/")
		if id == "" || strings.ContainsFunc(id, func(r rune) bool { return r < '0' || r > '9' }) {
			return "", ""
		}
		base := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path[:i] + "/executions"}
		return id, base.String()
	}
	return "", ""
}
