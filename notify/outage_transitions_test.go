package notify

import (
	"testing"
	"time"
)

// The outage message, transition by transition: every state of a
// breaker_opened message against every event that edits it in place.
func TestOutageTransitions(t *testing.T) {
	window := 5 * time.Minute
	outage := func(status Status, parked int, seq uint64) *Record {
		r := &Record{Header: Header{ID: "n_1", Kind: KindBreakerOpened, Status: status, Count: 1, CreatedAt: created, FirstAt: created},
			Breaker: Breaker{Destination: "hubspot", Parked: parked, OutageSeq: seq}}
		if status == StatusDelivered {
			t := created
			r.SlackChannel, r.SlackTS, r.DeliveredAt, r.LastSentAt = "C1", "1.1", &t, created
		} else {
			r.DueAt = created
		}
		return r
	}
	closed := func(by string) func() *Record {
		return func() *Record {
			r := outage(StatusDelivered, 5, 8)
			c := created
			r.ClosedAt, r.ResetBy, r.ParkedLeft = &c, by, 5
			return r
		}
	}
	states := map[string]func() *Record{
		"open, not posted yet":   func() *Record { return outage(StatusPending, 0, 5) },
		"open, posted, 5 parked": func() *Record { return outage(StatusDelivered, 5, 5) },
		"closed by the probe":    closed(""),
		"closed by a reset":      closed("alice"),
		"caught up":              func() *Record { r := closed("")(); c := created; r.CaughtUpAt = &c; return r },
		"caught up as reported": func() *Record {
			r := closed("")()
			c := created
			r.CaughtUpAt, r.CatchUpSeq, r.ParkedLeft = &c, 8, 0
			return r
		},
		"superseded":               func() *Record { r := closed("")(); c := created; r.SupersededAt = &c; return r },
		"a stuck key's message":    func() *Record { r := outage(StatusDelivered, 0, 5); r.Kind = KindKeyUnknown; return r },
		"an older guard's message": func() *Record { r := outage(StatusDelivered, 0, 0); r.Kind = KindBreakerClosed; return r },
	}
	events := map[string]func(*Record) *Record{
		"0 parked seen":          func(r *Record) *Record { return parkedSeen(r, 0, at, window) },
		"3 parked seen":          func(r *Record) *Record { return parkedSeen(r, 3, at, window) },
		"9 parked seen":          func(r *Record) *Record { return parkedSeen(r, 9, at, window) },
		"a parked key lost":      func(r *Record) *Record { return parkedLostSeen(r, 9, at, window) },
		"a lost key read again":  func(r *Record) *Record { return parkedLostSeen(r, 5, at, window) },
		"closed, 9 parked":       func(r *Record) *Record { return breakerClosed(r, 8, "", 2, 9, at, at) },
		"closed, nothing parked": func(r *Record) *Record { return breakerClosed(r, 8, "", 2, 0, at, at) },
		"reset by bob, 9 parked": func(r *Record) *Record { return breakerClosed(r, 8, "bob", 0, 9, at, at) },
		"a closing read again":   func(r *Record) *Record { return breakerClosed(r, 5, "", 2, 9, at, at) },
		"opened again":           func(r *Record) *Record { return outageSuperseded(r, 10, at, at) },
		"an opening read again":  func(r *Record) *Record { return outageSuperseded(r, 5, at, at) },
		"a catch-up reported":    func(r *Record) *Record { return catchUpReported(r, 9, 40*time.Second, at) },
	}
	type want struct {
		parked, lost   int
		closed, caught bool
		resetBy        string
		due            time.Duration // from created; -1: none
		superseded     bool
		left           int // still parked during the catch-up
	}
	const soon = 150 * time.Second // half the window after the last post
	const now = time.Minute        // at
	const unchanged = "unchanged"
	pending := map[string]any{
		"0 parked seen":          unchanged,
		"3 parked seen":          want{parked: 3},
		"9 parked seen":          want{parked: 9},
		"a parked key lost":      want{lost: 1},
		"a lost key read again":  unchanged,
		"closed, 9 parked":       want{parked: 9, closed: true, left: 9},
		"closed, nothing parked": want{closed: true, caught: true},
		"reset by bob, 9 parked": want{parked: 9, closed: true, resetBy: "bob", left: 9},
		"a closing read again":   unchanged,
		"opened again":           want{superseded: true},
		"an opening read again":  unchanged,
		"a catch-up reported":    unchanged, // no close yet: another outage's report
	}
	posted := map[string]any{
		"0 parked seen":          unchanged,
		"3 parked seen":          unchanged,
		"9 parked seen":          want{parked: 9, due: soon},
		"a parked key lost":      want{parked: 5, lost: 1, due: soon},
		"a lost key read again":  unchanged,
		"closed, 9 parked":       want{parked: 9, closed: true, due: now, left: 9},
		"closed, nothing parked": want{parked: 5, closed: true, caught: true, due: now},
		"reset by bob, 9 parked": want{parked: 9, closed: true, resetBy: "bob", due: now, left: 9},
		"a closing read again":   unchanged,
		"opened again":           want{parked: 5, superseded: true, due: now},
		"an opening read again":  unchanged,
		"a catch-up reported":    unchanged,
	}
	catchingUp := func(by string) map[string]any {
		return map[string]any{
			"0 parked seen":          want{parked: 5, closed: true, caught: true, resetBy: by, due: now},
			"3 parked seen":          want{parked: 5, closed: true, resetBy: by, due: soon, left: 3},
			"9 parked seen":          want{parked: 9, closed: true, resetBy: by, due: soon, left: 9},
			"a parked key lost":      want{parked: 5, lost: 1, closed: true, resetBy: by, due: soon, left: 5},
			"a lost key read again":  unchanged,
			"closed, 9 parked":       unchanged,
			"closed, nothing parked": unchanged,
			"reset by bob, 9 parked": unchanged,
			"a closing read again":   unchanged,
			"opened again":           want{parked: 5, closed: true, resetBy: by, due: now, superseded: true, left: 5},
			"an opening read again":  unchanged,
			"a catch-up reported":    want{parked: 5, closed: true, caught: true, resetBy: by, due: now},
		}
	}
	none := map[string]any{}
	for e := range events {
		none[e] = unchanged
	}
	// Caught up, a loss still counts: a woken execution found silent after
	// the bound was lost, not resumed, and the closing line says so.
	caught := map[string]any{}
	for e := range events {
		caught[e] = unchanged
	}
	caught["a parked key lost"] = want{parked: 5, lost: 1, closed: true, caught: true, due: soon, left: 5}
	// Caught up by the counts, then the catch-up's report: its took wins.
	caught["a catch-up reported"] = want{parked: 5, closed: true, caught: true, due: now}
	// Caught up as a catch-up reported: a second report (another guard's)
	// changes nothing; a loss still counts.
	reported := map[string]any{}
	for e := range events {
		reported[e] = unchanged
	}
	reported["a parked key lost"] = want{parked: 5, lost: 1, closed: true, caught: true, due: soon}
	table := map[string]map[string]any{
		"open, not posted yet":     pending,
		"open, posted, 5 parked":   posted,
		"closed by the probe":      catchingUp(""),
		"closed by a reset":        catchingUp("alice"),
		"caught up":                caught,
		"caught up as reported":    reported,
		"superseded":               none,
		"a stuck key's message":    none,
		"an older guard's message": none,
	}
	for sname, mk := range states {
		for ename, ev := range events {
			t.Run(sname+" / "+ename, func(t *testing.T) {
				exp, ok := table[sname][ename]
				if !ok {
					t.Fatal("no row for this pair")
				}
				cur := mk()
				before := *cur
				next := ev(cur)
				if cur.Parked != before.Parked || cur.Version != before.Version || cur.DueAt != before.DueAt {
					t.Fatal("the stored record was changed in place")
				}
				if exp == unchanged {
					if next != nil {
						t.Fatalf("changed: %+v", next.Breaker)
					}
					return
				}
				w := exp.(want)
				if next == nil {
					t.Fatal("nothing changed")
				}
				due := time.Duration(-1)
				if !next.DueAt.IsZero() {
					due = next.DueAt.Sub(created)
				}
				if cur.Status == StatusPending {
					w.due = 0 // the post shows it
				}
				got := want{next.Parked, next.ParkedLost, next.ClosedAt != nil, next.CaughtUpAt != nil, next.ResetBy, due, next.SupersededAt != nil, next.ParkedLeft}
				if got != w {
					t.Fatalf("got %+v, want %+v", got, w)
				}
				if ename == "a catch-up reported" && next.CaughtUpAt.Sub(*next.ClosedAt) != 40*time.Second {
					t.Fatalf("caught up %s after the close, want the report's took of 40s", next.CaughtUpAt.Sub(*next.ClosedAt))
				}
				if next.Version <= cur.Version {
					t.Fatalf("version %d: a change during a Slack call would not be shown", next.Version)
				}
			})
		}
	}
}
