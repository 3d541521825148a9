package notify

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/n8n-guard/n8n-guard/keystore"
)

const eventBatch = 100

// consumeEvents turns new keystore events into notifications, and key
// resolutions into updated messages. The cursor is saved in the same
// transaction as the notifications, so a restart neither loses nor
// repeats an alert (a resolution seen twice changes nothing the second
// time).
func (s *Service) consumeEvents(ctx context.Context) {
	if s.opts.Events == nil {
		return
	}
	for ctx.Err() == nil {
		n, err := s.consumeBatch(ctx)
		if err != nil {
			if !s.eventsFault && ctx.Err() == nil {
				s.log.Error("reading keystore events failed; will retry", "err", err)
			}
			s.eventsFault = true
			return
		}
		if s.eventsFault {
			s.log.Info("reading keystore events works again")
			s.eventsFault = false
		}
		if n < eventBatch {
			return
		}
	}
}

func (s *Service) consumeBatch(ctx context.Context) (int, error) {
	cur, err := s.outbox.EventCursor(ctx)
	if err != nil {
		return 0, err
	}
	evs, err := s.opts.Events.Events(ctx, cur, eventBatch)
	if err != nil || len(evs) == 0 {
		return 0, err
	}
	var adds []Addition
	last := cur
	// flush stores what the batch made so far, so an event that edits a
	// message finds the one an earlier event of the batch made.
	flush := func() error {
		res, err := s.outbox.Add(ctx, adds, &last)
		if err != nil {
			return fmt.Errorf("store notifications of events: %w", err)
		}
		s.countAdded(res)
		adds = nil
		return nil
	}
	// Key resolutions in a row (a group decided at once) are taken
	// together, each on its own message (settleResolved).
	var resolved []keystore.Event
	for _, ev := range evs {
		if ev.Seq <= last {
			continue // never go back
		}
		if ev.Kind == keystore.EventKeyResolved {
			resolved = append(resolved, ev)
			last = ev.Seq
			continue
		}
		if err := s.settleResolved(ctx, resolved); err != nil {
			return 0, err
		}
		resolved = nil
		switch ev.Kind {
		case keystore.EventApprovalDecided:
			if err := s.approvalDecided(ctx, ev); err != nil { // approval.go
				return 0, err
			}
			last = ev.Seq
			continue
		case keystore.EventBreakerClosed, keystore.EventParkedLost, keystore.EventBreakerOpened, keystore.EventCaughtUp:
			if opensOutage(adds, ev.Destination) {
				if err := flush(); err != nil {
					return 0, err
				}
			}
			edited, err := s.foldIntoOutage(ctx, ev)
			if err != nil {
				return 0, err
			}
			if edited && ev.Kind == keystore.EventBreakerClosed {
				last = ev.Seq
				continue // the outage's message says it: no second message
			}
		}
		last = ev.Seq
		if a, ok := s.fromEvent(ctx, ev); ok {
			adds = append(adds, a)
		}
	}
	if err := s.settleResolved(ctx, resolved); err != nil {
		return 0, err
	}
	if err := flush(); err != nil {
		return 0, err
	}
	s.poke()
	return len(evs), nil
}

// settleWorkers is how many key resolutions are settled at once.
const settleWorkers = 8

// settleResolved takes key resolutions a few at a time (keyResolved is
// idempotent and each touches its own key's messages; the outbox commits
// concurrent settles together). The first error is returned: the batch is
// read again, and what was settled is not counted twice.
func (s *Service) settleResolved(ctx context.Context, evs []keystore.Event) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, settleWorkers)
	for _, ev := range evs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.keyResolved(ctx, ev); err != nil {
				mu.Lock()
				first = cmp.Or(first, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// opensOutage reports an addition of adds that is the outage message of
// dest.
func opensOutage(adds []Addition, dest string) bool {
	for _, a := range adds {
		if a.Record.Kind == KindBreakerOpened && a.Record.Destination == dest {
			return true
		}
	}
	return false
}

func (s *Service) countAdded(res []Added) {
	for _, a := range res {
		if a.Skipped {
			continue
		}
		status := "queued"
		if a.Joined {
			status = "grouped"
		}
		s.m.accepted.WithLabelValues(string(a.Record.Kind), status).Inc()
	}
}

// keyResolved updates the messages about the key's resolved attempt: a
// person decided (in the API, the console, the CLI or another message),
// so the buttons go, the message says who, and escalation stops.
func (s *Service) keyResolved(ctx context.Context, ev keystore.Event) error {
	// The group the key's attempt is a member of counts it as decided,
	// once however often the event is read (group.go).
	completed, now := ev.Message == string(keystore.StateCompleted), s.now()
	head, err := s.outbox.Settle(ctx, Member{Namespace: ev.Namespace, Key: ev.Key, Attempt: ev.Attempt}, func(x *Record) {
		*x = *keySettled(x, completed, ev.Owner, ev.At, now, s.cfg.GroupWindow)
	})
	if err != nil {
		return err
	}
	if head != nil {
		if !head.IsKeyGroup() {
			s.updateEscalations(ctx, head, func(x *Record) *Record { return resolvedElsewhere(x, completed, ev.Owner, ev.At, now) })
		}
		s.poke()
	}
	about, err := s.outbox.AboutKey(ctx, ev.Namespace, ev.Key, 10)
	if err != nil {
		return err
	}
	for _, r := range about {
		// Messages written before groups kept their keys (Settled 0, no
		// member) are decided by their own key, as they always were.
		if r.Kind != KindKeyUnknown || r.KeyAttempt != ev.Attempt || r.Settled > 0 || (head != nil && r.ID == head.ID) {
			continue
		}
		s.decidedElsewhere(ctx, r.ID, ev.Message == string(keystore.StateCompleted), ev.Owner, ev.At, s.now())
	}
	return nil
}

// fromEvent builds the notification of one event; the owner comes from the
// namespace (stuck keys) or the destination (breakers) in the config.
func (s *Service) fromEvent(ctx context.Context, ev keystore.Event) (Addition, bool) {
	now := s.now()
	at := ev.At
	if at.IsZero() {
		at = now
	}
	kind, ok := kindOf(ev.Kind)
	if !ok {
		return Addition{}, false
	}
	rec := &Record{
		Header: Header{ID: newID(now), Kind: kind, Status: StatusPending, Count: 1,
			FirstAt: at, LastAt: at, CreatedAt: now, EventSeq: ev.Seq,
			Reason: string(ev.Reason), Message: clean(ev.Message, maxMessageRunes)},
		Delivery: Delivery{DueAt: now},
	}
	switch ev.Kind {
	case keystore.EventApprovalRequested:
		return s.approvalRequest(ev, rec, at), true // approval.go
	case keystore.EventKeyUnknown:
		rt := s.toKeyOwner(rec, ev)
		rec.Holder = clean(ev.Owner, 128)
		rec.EscalateAt = firstEscalation(rt, at)
		// Many keys of one namespace going unknown at once (the target went
		// down) make one message whose count says how many.
		rec.Group = groupOf(string(ev.Kind), ev.Namespace)
		once := fmt.Sprintf("%s\x00%s\x00%s\x00%d", ev.Kind, ev.Namespace, ev.Key, ev.Attempt)
		return Addition{Record: rec, Window: s.cfg.GroupWindow, Once: once,
			Member: &Member{Namespace: ev.Namespace, Key: ev.Key, Attempt: ev.Attempt}}, true
	case keystore.EventBreakerOpened, keystore.EventBreakerClosed:
		rt := s.cfg.forRoute(s.cfg.Destinations, ev.Destination)
		rec.Owner, rec.Channel, rec.Runbook = rt.Owner, rt.Channel, rt.Runbook
		rec.Breaker = Breaker{Destination: ev.Destination, PausedReserves: ev.PausedReserves}
		if by, reason, ok := keystore.ResetOf(ev); ok {
			// A person closed it: the message says who and why, never
			// that the destination is back.
			at := ev.At
			rec.ResetBy, rec.ResetReason, rec.ClosedAt = by, reason, &at
		}
		if ev.ReopensAt != nil {
			t := *ev.ReopensAt
			rec.ReopensAt = &t
		}
		rec.Group = groupOf(string(ev.Kind), ev.Destination, fmt.Sprint(ev.Seq))
		rec.OutageSeq = ev.Seq
		return Addition{Record: rec, Once: fmt.Sprintf("%s\x00%s\x00%d", ev.Kind, ev.Destination, ev.Seq)}, true
	case keystore.EventParkedLost, keystore.EventParkedOverdue:
		s.toKeyOwner(rec, ev)
		rec.Destination = ev.Destination
		rec.ParkedKey = s.parkedKey(ctx, ev)
		// A storm of them (n8n pruned its waiting executions, a long
		// outage) is one message per namespace and destination with a count.
		rec.Group = groupOf(string(ev.Kind), ev.Namespace, ev.Destination)
		once := fmt.Sprintf("%s\x00%s\x00%s\x00%d", ev.Kind, ev.Namespace, ev.Key, ev.Attempt)
		return Addition{Record: rec, Window: s.cfg.GroupWindow, Once: once}, true
	case keystore.EventRerunRefused:
		s.toKeyOwner(rec, ev)
		rec.RerunBy = clean(ev.Owner, 128)
		rec.Destination = ev.Destination
		// A bulk re-run refused as a whole (n8n down, pruned executions) is
		// one message per namespace with a count.
		rec.Group = groupOf(string(ev.Kind), ev.Namespace)
		// Once per refusal: a person may allow the same attempt again and
		// hear of a second refusal; the event is written once per refusal
		// (NoteRerun notes only a granted key), so its seq names it.
		once := fmt.Sprintf("%s\x00%s\x00%s\x00%d\x00%d", ev.Kind, ev.Namespace, ev.Key, ev.Attempt, ev.Seq)
		return Addition{Record: rec, Window: s.cfg.GroupWindow, Once: once}, true
	case keystore.EventRecordDamaged:
		s.toKeyOwner(rec, ev)
		rec.KeyAttempt = 0 // the record, not an attempt of it
		rec.Group = groupOf(string(ev.Kind), ev.Namespace, ev.Key)
		// Each guard process reports a damaged record it meets: its owner
		// hears of the key once.
		return Addition{Record: rec, Once: fmt.Sprintf("%s\x00%s\x00%s", ev.Kind, ev.Namespace, ev.Key)}, true
	}
	return Addition{}, false
}

// toKeyOwner routes rec to the owner of ev's namespace and names its key
// and attempt; it returns the route.
func (s *Service) toKeyOwner(rec *Record, ev keystore.Event) route {
	rt := s.cfg.forRoute(s.cfg.Namespaces, ev.Namespace)
	rec.Owner, rec.Channel, rec.Runbook = rt.Owner, rt.Channel, rt.Runbook
	rec.KeyPayload = KeyPayload{Namespace: ev.Namespace, Key: Truncate(ev.Key, 255), KeyAttempt: ev.Attempt}
	return rt
}

// kindOf maps the key domain's event kinds to the notifications they make:
// said, not cast, so a kind renamed on either side cannot slip through.
func kindOf(k keystore.EventKind) (Kind, bool) {
	switch k {
	case keystore.EventKeyUnknown:
		return KindKeyUnknown, true
	case keystore.EventBreakerOpened:
		return KindBreakerOpened, true
	case keystore.EventBreakerClosed:
		return KindBreakerClosed, true
	case keystore.EventApprovalRequested:
		return KindApproval, true
	case keystore.EventParkedLost:
		return KindParkedLost, true
	case keystore.EventParkedOverdue:
		return KindParkedOverdue, true
	case keystore.EventRecordDamaged:
		return KindRecordDamaged, true
	case keystore.EventRerunRefused:
		return KindRerunRefused, true
	}
	return "", false
}
