package storetest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Parked keys (keystore/park.go): an event that meets a paused
// destination waits in n8n and is resumed by the guard, one key at a time
// as the breaker's probe, then the rest oldest first.

const resumeBase = "http://n8n.local/webhook-waiting/"

func withResume(execID string) func(*keystore.ReserveRequest) {
	return func(r *keystore.ReserveRequest) { r.ResumeURL = resumeBase + execID }
}

func parkStore(t *testing.T, e *env) keystore.ParkStore {
	t.Helper()
	return e.s
}

// queue is dest's catch-up queue as the catch-up worker reads it: the
// keys waiting or claimed, the longest waiting first.
func queue(dest string) keystore.WaitQuery {
	return keystore.WaitQuery{Destination: dest, Stages: keystore.QueuedStages}
}

// parkedKeys lists the keys of dest's catch-up queue.
func parkedKeys(t *testing.T, e *env, dest string) []string {
	t.Helper()
	rs, err := parkStore(t, e).ParkedByWait(e.ctx, queue(dest))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range rs {
		keys = append(keys, r.Key)
	}
	return keys
}

func claim(t *testing.T, e *env, key string) bool {
	t.Helper()
	_, ok, err := parkStore(t, e).ClaimResume(e.ctx, ns, key, 30*time.Second)
	if err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	return ok
}

// openHubspot opens hubspot's breaker with a key that finds it unreachable.
func openHubspot(t *testing.T, e *env) {
	t.Helper()
	r := e.reserve(ns, "evt_first", withDest("hubspot"))
	wantOutcome(t, e.fail(ns, "evt_first", r.Token, keystore.ReasonDestinationUnreachable), keystore.OutcomeDestinationFailed)
}

func runParking(t *testing.T, newStore New) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"hubspot": {Cooldown: time.Minute, FailureThreshold: 3, UnreachableThreshold: 1},
		"salesforce": {UnreachableThreshold: 1}}}
	t.Run("a paused reserve with resume_url parks; copies answer parked and write nothing", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		p := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("101"))
		wantOutcome(t, p, keystore.OutcomeParked)
		wantState(t, p, keystore.StateParked)
		if p.Proceed || p.Token != "" || keystore.CeilSeconds(p.RetryAfter) != 60 {
			t.Fatalf("parked answer: %+v", p)
		}
		if p.Record.ResumeURL != resumeBase+"101" || p.Record.ParkedAt == nil || p.Record.Destination != "hubspot" || p.Record.Attempt != 0 {
			t.Fatalf("parked record: %+v", p.Record)
		}
		e.restart()
		before := e.lookup(ns, "evt_1")
		wantState(t, before, keystore.StateParked)
		sameRecord(t, p.Record, before.Record)
		for i, mod := range []func(*keystore.ReserveRequest){withResume("102"), withResume("101"), func(*keystore.ReserveRequest) {}} {
			c := e.reserve(ns, "evt_1", withDest("hubspot"), mod)
			wantOutcome(t, c, keystore.OutcomeParked)
			if c.Proceed {
				t.Fatalf("copy %d proceeds", i)
			}
		}
		sameRecord(t, before.Record, e.lookup(ns, "evt_1").Record)
		// Without resume_url nothing changes: paused, nothing recorded.
		wantOutcome(t, e.reserve(ns, "evt_2", withDest("hubspot")), keystore.OutcomeDestinationPaused)
		wantState(t, e.lookup(ns, "evt_2"), keystore.StateAbsent)
		if got := parkedKeys(t, e, "hubspot"); fmt.Sprint(got) != "[evt_1]" {
			t.Fatalf("parked = %v", got)
		}
	})
	t.Run("a failure with resume_url that opens the breaker parks the key", func(t *testing.T) {
		e := setup(t, newStore, pol)
		r := e.reserve(ns, "evt_1", withDest("hubspot"))
		f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: r.Token, Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeBase + "7"})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, f, keystore.OutcomeParked)
		wantState(t, f, keystore.StateParked)
		if f.Record.Attempt != 1 || f.Record.Reason != keystore.ReasonDestinationUnreachable {
			t.Fatalf("record: %+v", f.Record)
		}
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen {
			t.Fatalf("breaker %s, want open", b.State)
		}
		// The same report again is answered the same, without a write.
		again, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: r.Token, Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeBase + "7"})
		if err != nil || again.Outcome != keystore.OutcomeParked {
			t.Fatalf("repeat: %+v %v", again, err)
		}
		// A failure that leaves the breaker closed does not park.
		r2 := e.reserve(ns, "evt_2", withDest("salesforce"))
		f2, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_2", Token: r2.Token, Reason: keystore.ReasonDestinationFailed, ResumeURL: resumeBase + "8"})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, f2, keystore.OutcomeDestinationFailed)
	})
	t.Run("parked keys are listed per destination, oldest first, and counted", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for i := 0; i < 5; i++ {
			wantOutcome(t, e.reserve(ns, fmt.Sprintf("evt_%d", 5-i), withDest("hubspot"), withResume(fmt.Sprint(i))), keystore.OutcomeParked)
			e.clock.Advance(time.Second)
		}
		r := e.reserve(ns, "evt_sf", withDest("salesforce"))
		e.fail(ns, "evt_sf", r.Token, keystore.ReasonDestinationUnreachable)
		wantOutcome(t, e.reserve(ns, "evt_s1", withDest("salesforce"), withResume("s1")), keystore.OutcomeParked)
		if got := parkedKeys(t, e, "hubspot"); fmt.Sprint(got) != "[evt_5 evt_4 evt_3 evt_2 evt_1]" {
			t.Fatalf("parked = %v, want oldest first", got)
		}
		ps := parkStore(t, e)
		q := queue("hubspot")
		q.Limit = 2
		page, err := ps.ParkedByWait(e.ctx, q)
		if err != nil || len(page) != 2 {
			t.Fatalf("page: %v %v", page, err)
		}
		rest, err := ps.ParkedByWait(e.ctx, queue("hubspot").Next(page[1]))
		if err != nil || len(rest) != 3 || rest[0].Key != "evt_3" {
			t.Fatalf("next page: %v %v", rest, err)
		}
		counts, err := ps.ParkedCounts(e.ctx)
		if err != nil || counts["hubspot"] != 5 || counts["salesforce"] != 1 || len(counts) != 2 {
			t.Fatalf("counts = %v %v", counts, err)
		}
		if all := listAll(t, e, keystore.ListQuery{State: keystore.StateParked}); len(all) != 6 {
			t.Fatalf("list state=parked: %d, want 6", len(all))
		}
		c, err := e.s.Counts(e.ctx)
		if err != nil || c[ns][keystore.StateParked] != 6 {
			t.Fatalf("counts by state: %v %v", c, err)
		}
	})
	t.Run("catch-up: one probe after the cooldown, the rest once it completed", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for _, k := range []string{"evt_1", "evt_2", "evt_3"} {
			wantOutcome(t, e.reserve(ns, k, withDest("hubspot"), withResume(k)), keystore.OutcomeParked)
			e.clock.Advance(time.Second)
		}
		if claim(t, e, "evt_1") {
			t.Fatalf("claimed during the cooldown")
		}
		e.clock.Advance(time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatalf("the oldest key could not become the probe")
		}
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerHalfOpen {
			t.Fatalf("breaker %s, want half_open with the probe out", b.State)
		}
		if claim(t, e, "evt_1") || claim(t, e, "evt_2") {
			t.Fatalf("a second claim while the probe is out")
		}
		// A copy of a parked key that is not the probe is still parked.
		wantOutcome(t, e.reserve(ns, "evt_2", withDest("hubspot"), withResume("x")), keystore.OutcomeParked)
		ps := parkStore(t, e)
		parkedAt := *e.lookup(ns, "evt_1").Record.ParkedAt
		rec, err := ps.ResumeAnswered(e.ctx, ns, "evt_1", parkedAt, keystore.ResumeAccepted, "")
		if err != nil || rec == nil || rec.ResumeSentAt == nil {
			t.Fatalf("resume answered: %+v %v", rec, err)
		}
		if got := parkedKeys(t, e, "hubspot"); fmt.Sprint(got) != "[evt_2 evt_3]" {
			t.Fatalf("parked after the probe was sent = %v", got)
		}
		e.restart()
		// The resumed execution reserves again: accepted, next attempt.
		a := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("evt_1"))
		wantOutcome(t, a, keystore.OutcomeAccepted)
		if a.Record.Attempt != 1 || a.Record.ResumeURL != "" || a.Record.ParkedAt != nil {
			t.Fatalf("resumed record: %+v", a.Record)
		}
		wantOutcome(t, e.complete(ns, "evt_1", a.Token, "crm-1"), keystore.OutcomeCompleted)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed {
			t.Fatalf("breaker %s after the probe completed, want closed", b.State)
		}
		for _, k := range []string{"evt_2", "evt_3"} {
			if !claim(t, e, k) {
				t.Fatalf("claim %s with the breaker closed refused", k)
			}
			wantOutcome(t, e.reserve(ns, k, withDest("hubspot"), withResume(k)), keystore.OutcomeAccepted)
		}
		if got := parkedKeys(t, e, "hubspot"); len(got) != 0 {
			t.Fatalf("still parked: %v", got)
		}
	})
	t.Run("a woken key counts as woken until its execution reserves again or it is recorded lost", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for _, k := range []string{"evt_1", "evt_2", "evt_3"} {
			wantOutcome(t, e.reserve(ns, k, withDest("hubspot"), withResume(k)), keystore.OutcomeParked)
			e.clock.Advance(time.Second)
		}
		counts := func(want string) {
			t.Helper()
			parked, err := parkStore(t, e).ParkedCounts(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			woken, err := parkStore(t, e).WokenCounts(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("parked %d woken %d (%d destinations)", parked["hubspot"], woken["hubspot"], len(woken)); got != want {
				t.Fatalf("%s, want %s", got, want)
			}
		}
		answer := func(key string, a keystore.ResumeAnswer) {
			t.Helper()
			if _, err := parkStore(t, e).ResumeAnswered(e.ctx, ns, key, *e.lookup(ns, key).Record.ParkedAt, a, "test"); err != nil {
				t.Fatal(err)
			}
		}
		counts("parked 3 woken 0 (0 destinations)")
		e.clock.Advance(time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatalf("the probe could not be claimed")
		}
		counts("parked 3 woken 0 (0 destinations)") // claimed, not woken yet: still parked
		answer("evt_1", keystore.ResumeAccepted)
		counts("parked 2 woken 1 (1 destinations)")
		e.restart()
		counts("parked 2 woken 1 (1 destinations)")
		a := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("evt_1"))
		wantOutcome(t, a, keystore.OutcomeAccepted) // the woken execution reserved again
		counts("parked 2 woken 0 (0 destinations)")
		wantOutcome(t, e.complete(ns, "evt_1", a.Token, "crm-1"), keystore.OutcomeCompleted)
		for _, k := range []string{"evt_2", "evt_3"} {
			if !claim(t, e, k) {
				t.Fatalf("claim %s refused", k)
			}
			answer(k, keystore.ResumeAccepted)
		}
		counts("parked 0 woken 2 (1 destinations)")
		answer("evt_2", keystore.ResumeSilent) // its execution died after waking
		counts("parked 0 woken 1 (1 destinations)")
		if r := e.lookup(ns, "evt_2").Record; r.State != keystore.StateParked || r.Reason != keystore.ReasonResumeLost {
			t.Fatalf("silent key: %s %s, want parked resume_lost", r.State, r.Reason)
		}
		if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_3", Resolution: keystore.StateFailed, By: "ops", Note: "checked"}); err != nil {
			t.Fatal(err)
		}
		counts("parked 0 woken 0 (0 destinations)")
	})
	t.Run("a probe that fails re-opens the breaker and is parked again, after the others, keeping its wait", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		var first []time.Time
		for _, k := range []string{"evt_1", "evt_2"} {
			first = append(first, *e.reserve(ns, k, withDest("hubspot"), withResume(k)).Record.ParkedAt)
			e.clock.Advance(time.Second)
		}
		e.clock.Advance(time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatal("no probe")
		}
		a := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("evt_1"))
		wantOutcome(t, a, keystore.OutcomeAccepted)
		f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: a.Token, Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeBase + "evt_1"})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, f, keystore.OutcomeParked)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen {
			t.Fatalf("breaker %s, want open again", b.State)
		}
		// Parked anew after the others, its wait kept from its first
		// parking: the queue, read by the start of the wait, holds both,
		// the failed probe first, so it is the probe again after the next
		// cooldown (the event that waited longest).
		if got := f.Record; !got.ParkedAt.After(first[1]) || got.WaitingSince() == nil || !got.WaitingSince().Equal(first[0]) {
			t.Fatalf("parked anew at %v waiting since %v, want after evt_2's parking (%v) and since its first (%v)", got.ParkedAt, got.WaitingSince(), first[1], first[0])
		}
		if got := parkedKeys(t, e, "hubspot"); fmt.Sprint(got) != "[evt_1 evt_2]" {
			t.Fatalf("parked = %v, want both, the failed probe first by its wait", got)
		}
		if claim(t, e, "evt_2") {
			t.Fatal("claimed while open again")
		}
	})
	t.Run("a resume n8n no longer holds is lost: told, never resumed again", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		p := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		e.clock.Advance(time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatal("no claim")
		}
		rec, err := parkStore(t, e).ResumeAnswered(e.ctx, ns, "evt_1", *p.Record.ParkedAt, keystore.ResumeLost, "n8n answered 404: execution 1 not found")
		if err != nil || rec == nil || rec.Reason != keystore.ReasonResumeLost || rec.State != keystore.StateParked {
			t.Fatalf("lost: %+v %v", rec, err)
		}
		if got := parkedKeys(t, e, "hubspot"); len(got) != 0 {
			t.Fatalf("a lost key is still queued: %v", got)
		}
		e.clock.Advance(time.Hour)
		if claim(t, e, "evt_1") {
			t.Fatal("a lost key was claimed again")
		}
		var lost int
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventParkedLost && ev.Key == "evt_1" {
				lost++
			}
		}
		if lost != 1 {
			t.Fatalf("%d parked_lost events, want 1", lost)
		}
		// A person decides: resolved like a failed key.
		res, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: "evt_1", Resolution: keystore.StateCompleted, By: "ops", Note: "entered by hand"})
		if err != nil || res.Record.State != keystore.StateCompleted {
			t.Fatalf("resolve: %+v %v", res, err)
		}
	})
	t.Run("a lost probe frees the destination at once: the next parked keys are claimed without waiting for claim + lease", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		var parkedAt []time.Time
		for i := range 4 {
			p := e.reserve(ns, fmt.Sprintf("evt_%d", i), withDest("hubspot"), withResume(fmt.Sprint(i)))
			parkedAt = append(parkedAt, *p.Record.ParkedAt)
			e.clock.Advance(time.Millisecond)
		}
		e.clock.Advance(time.Minute) // the cooldown is over
		if !claim(t, e, "evt_0") {
			t.Fatal("the oldest key was not claimed as the probe")
		}
		if claim(t, e, "evt_1") {
			t.Fatal("a second key was claimed while the probe is out")
		}
		// The probe's execution is gone, and so is the next one's.
		for i := range 2 {
			key := fmt.Sprintf("evt_%d", i)
			if i > 0 && !claim(t, e, key) {
				t.Fatalf("%s was not claimed at once after the lost probe", key)
			}
			if _, err := parkStore(t, e).ResumeAnswered(e.ctx, ns, key, parkedAt[i], keystore.ResumeLost, "n8n answered 404"); err != nil {
				t.Fatal(err)
			}
		}
		if !claim(t, e, "evt_2") {
			t.Fatal("the next parked key waits for the lost probes' claim + lease")
		}
		if claim(t, e, "evt_3") {
			t.Fatal("the new probe does not hold the destination")
		}
		e.restart()
		if claim(t, e, "evt_3") {
			t.Fatal("after a restart the new probe does not hold the destination")
		}
	})
	t.Run("a claim is extended by its holder while its call is in flight, and handed back when not used", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for i := range 2 {
			wantOutcome(t, e.reserve(ns, fmt.Sprintf("evt_%d", i), withDest("hubspot"), withResume(fmt.Sprint(i))), keystore.OutcomeParked)
			e.clock.Advance(time.Millisecond)
		}
		e.clock.Advance(time.Minute) // the cooldown is over
		ps := parkStore(t, e)
		rec, ok, err := ps.ClaimResume(e.ctx, ns, "evt_0", 30*time.Second)
		if err != nil || !ok {
			t.Fatalf("the probe's claim: %v %v", ok, err)
		}
		held := *rec.ResumeClaimUntil
		// 25 s later its holder extends it: 30 s from then, and the probe's hold.
		e.clock.Advance(25 * time.Second)
		until, ok, err := ps.ExtendResumeClaim(e.ctx, ns, "evt_0", held, 30*time.Second)
		if err != nil || !ok || !until.Equal(e.clock.Now().Add(30*time.Second)) {
			t.Fatalf("extend: %v %v %v, want until %v", until, ok, err, e.clock.Now().Add(30*time.Second))
		}
		e.restart()
		ps = parkStore(t, e)
		e.clock.Advance(20 * time.Second) // past the first claim's end
		if claim(t, e, "evt_0") || claim(t, e, "evt_1") {
			t.Fatal("a second guard claimed a key under an extended claim")
		}
		// Not the holder's claim any more (a stale until): nothing changes.
		if _, ok, err := ps.ExtendResumeClaim(e.ctx, ns, "evt_0", held, time.Hour); err != nil || ok {
			t.Fatalf("a stale holder extended the claim: %v %v", ok, err)
		}
		if ok, err := ps.ReleaseResumeClaim(e.ctx, ns, "evt_0", held); err != nil || ok {
			t.Fatalf("a stale holder handed the claim back: %v %v", ok, err)
		}
		// Handed back unused: the key waits, the probe is given up, and
		// the next claim takes the oldest key at once.
		if ok, err := ps.ReleaseResumeClaim(e.ctx, ns, "evt_0", until); err != nil || !ok {
			t.Fatalf("hand back: %v %v", ok, err)
		}
		if p := keystore.PhaseOf(e.lookup(ns, "evt_0").Record); p != keystore.PhaseWaiting {
			t.Fatalf("a handed-back key is %s, want waiting", p)
		}
		if ok, err := ps.ReleaseResumeClaim(e.ctx, ns, "evt_0", until); err != nil || ok {
			t.Fatalf("handed back twice: %v %v", ok, err)
		}
		if !claim(t, e, "evt_0") || claim(t, e, "evt_1") {
			t.Fatal("the handed-back key is not the next probe at once")
		}
		// Answered: nothing to extend or hand back.
		cur := e.lookup(ns, "evt_0").Record
		if _, err := ps.ResumeAnswered(e.ctx, ns, "evt_0", *cur.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := ps.ExtendResumeClaim(e.ctx, ns, "evt_0", *cur.ResumeClaimUntil, 30*time.Second); err != nil || ok {
			t.Fatalf("an answered claim was extended: %v %v", ok, err)
		}
		if ok, err := ps.ReleaseResumeClaim(e.ctx, ns, "evt_0", *cur.ResumeClaimUntil); err != nil || ok {
			t.Fatalf("an answered claim was handed back: %v %v", ok, err)
		}
	})
	t.Run("a woken probe whose execution never reserves frees its destination a lease after the waking", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for i := range 2 {
			wantOutcome(t, e.reserve(ns, fmt.Sprintf("evt_%d", i), withDest("hubspot"), withResume(fmt.Sprint(i))), keystore.OutcomeParked)
			e.clock.Advance(time.Millisecond)
		}
		e.clock.Advance(time.Minute) // the cooldown is over
		rec, ok, err := parkStore(t, e).ClaimResume(e.ctx, ns, "evt_0", 2*time.Minute)
		if err != nil || !ok {
			t.Fatalf("the probe's claim: %v %v", ok, err)
		}
		e.clock.Advance(5 * time.Second)
		if _, err := parkStore(t, e).ResumeAnswered(e.ctx, ns, "evt_0", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		lease := keystore.Policies{}.Namespace(ns).Lease
		e.clock.Advance(lease - time.Millisecond)
		if claim(t, e, "evt_1") {
			t.Fatal("a second key was claimed while the woken probe may still reserve")
		}
		e.restart()
		e.clock.Advance(time.Millisecond) // the lease since the waking is over: its execution died
		if !claim(t, e, "evt_1") {
			t.Fatal("the next key waits for the dead probe's claim: its destination is held past the lease")
		}
	})
	t.Run("a claim behind an older key is never the probe: refused until the breaker closed", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		wantOutcome(t, e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1")), keystore.OutcomeParked)
		e.clock.Advance(time.Millisecond)
		wantOutcome(t, e.reserve(ns, "evt_2", withDest("hubspot"), withResume("2")), keystore.OutcomeParked)
		ps := parkStore(t, e)
		behind := func(key string) bool {
			t.Helper()
			_, ok, err := parkStore(t, e).ClaimResumeBehind(e.ctx, ns, key, 30*time.Second)
			if err != nil {
				t.Fatalf("claim behind %s: %v", key, err)
			}
			return ok
		}
		e.clock.Advance(time.Minute) // the cooldown is over: the breaker waits for a probe
		if behind("evt_1") || behind("evt_first") {
			t.Fatal("a claim behind another became the probe")
		}
		if p := keystore.PhaseOf(e.lookup(ns, "evt_1").Record); p != keystore.PhaseWaiting {
			t.Fatalf("a refused claim left the key %s", p)
		}
		rec, ok, err := ps.ClaimResume(e.ctx, ns, "evt_1", 30*time.Second)
		if err != nil || !ok {
			t.Fatalf("the probe's own claim: %v %v", ok, err)
		}
		if _, err := ps.ResumeAnswered(e.ctx, ns, "evt_1", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
			t.Fatal(err)
		}
		if behind("evt_2") {
			t.Fatal("a claim behind the probe went while the probe is out")
		}
		a := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		wantOutcome(t, e.complete(ns, "evt_1", a.Token, "crm-1"), keystore.OutcomeCompleted)
		if !behind("evt_2") { // closed: claims behind go
			t.Fatal("a claim behind was refused with the breaker closed")
		}
	})
	t.Run("a key parked too long is reported once per parked attempt, also by guards at once", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		p := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		at, limit := *p.Record.ParkedAt, 72*time.Hour
		e.clock.Advance(limit - time.Second)
		if ok, err := parkStore(t, e).ParkedOverdue(e.ctx, ns, "evt_1", at, limit); err != nil || ok {
			t.Fatalf("under the limit: reported %v (%v)", ok, err)
		}
		e.clock.Advance(time.Second)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := parkStore(t, e).ParkedOverdue(e.ctx, ns, "evt_1", at, limit)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d reports, want exactly 1", wins.Load())
		}
		var evs []keystore.Event
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventParkedOverdue {
				evs = append(evs, ev)
			}
		}
		if len(evs) != 1 || evs[0].Key != "evt_1" || evs[0].Destination != "hubspot" || evs[0].Namespace != ns {
			t.Fatalf("parked_overdue events %+v", evs)
		}
		res, err := e.s.Lookup(e.ctx, ns, "evt_1")
		if err != nil || res.Record.State != keystore.StateParked || res.Record.History[len(res.Record.History)-1].Event != keystore.HistoryParkedOverdue {
			t.Fatalf("after the report: %+v %v", res.Record, err)
		}
		if got := parkedKeys(t, e, "hubspot"); len(got) != 1 {
			t.Fatalf("the reported key left the queue: %v", got)
		}
		e.restart()
		e.clock.Advance(24 * time.Hour)
		if ok, err := parkStore(t, e).ParkedOverdue(e.ctx, ns, "evt_1", at, limit); err != nil || ok {
			t.Fatalf("reported again a day later, after a restart: %v (%v)", ok, err)
		}
	})
	t.Run("a failed probe that parks again keeps its event's wait: parked_limit counts from the first parking, reported once", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		opened := *breaker(t, e, "hubspot").OpenedAt
		first := *e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1")).Record.ParkedAt
		// One round of a rolling outage: the cooldown ends, the key is the
		// probe, n8n wakes its execution, whose write finds the
		// destination still down and parks again with a new resume URL.
		probeFails := func(execID string) time.Time {
			t.Helper()
			e.clock.Advance(time.Minute)
			rec, ok, err := parkStore(t, e).ClaimResume(e.ctx, ns, "evt_1", 30*time.Second)
			if err != nil || !ok {
				t.Fatalf("claim as the probe: %v %v", ok, err)
			}
			if _, err := parkStore(t, e).ResumeAnswered(e.ctx, ns, "evt_1", *rec.ParkedAt, keystore.ResumeAccepted, ""); err != nil {
				t.Fatal(err)
			}
			r := e.reserve(ns, "evt_1", withDest("hubspot"), withResume(execID))
			wantOutcome(t, r, keystore.OutcomeAccepted)
			e.restart() // the woken attempt keeps the wait in the store
			f, err := e.s.Fail(e.ctx, keystore.FailRequest{Namespace: ns, Key: "evt_1", Token: r.Token,
				Reason: keystore.ReasonDestinationUnreachable, ResumeURL: resumeBase + execID})
			if err != nil {
				t.Fatal(err)
			}
			wantState(t, f, keystore.StateParked)
			return *f.Record.ParkedAt
		}
		second := probeFails("2")
		e.restart()
		got := e.lookup(ns, "evt_1").Record
		if !got.ParkedAt.Equal(second) || got.ParkedSince == nil || !got.ParkedSince.Equal(first) || !got.WaitingSince().Equal(first) {
			t.Fatalf("parked anew at %v: parked_at %v, parked_since %v; want the new parking and the first %v", second, got.ParkedAt, got.ParkedSince, first)
		}
		limit := 150 * time.Second // past since the first parking, not since the second
		e.clock.Advance(first.Add(limit).Sub(e.clock.Now()))
		if ok, err := parkStore(t, e).ParkedOverdue(e.ctx, ns, "evt_1", second, limit); err != nil || !ok {
			t.Fatalf("waiting %v since its first parking, parked anew %v ago: reported %v (%v), want reported", limit, e.clock.Now().Sub(second), ok, err)
		}
		third := probeFails("3")
		e.clock.Advance(limit)
		if ok, err := parkStore(t, e).ParkedOverdue(e.ctx, ns, "evt_1", third, limit); err != nil || ok {
			t.Fatalf("the same wait reported again after parking anew: %v (%v)", ok, err)
		}
		if got := e.lookup(ns, "evt_1").Record; !got.WaitingSince().Equal(first) {
			t.Fatalf("after two rounds the wait began %v, want %v", got.WaitingSince(), first)
		}
		// The outage, too, is as old as its start, not its last probe.
		if b := breaker(t, e, "hubspot"); b.State == keystore.BreakerClosed || b.OpenedAt == nil || !b.OpenedAt.Equal(opened) {
			t.Fatalf("after two failed probes the breaker is %s, opened %v; want not closed, opened %v", b.State, b.OpenedAt, opened)
		}
	})
	t.Run("a lost key re-sent by its source parks anew and is queued, or goes through once the breaker closed", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		p := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		e.clock.Advance(time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatal("no claim")
		}
		if _, err := parkStore(t, e).ResumeAnswered(e.ctx, ns, "evt_1", *p.Record.ParkedAt, keystore.ResumeLost, "404"); err != nil {
			t.Fatal(err)
		}
		// The destination is paused again (a maintenance window): the
		// re-sent event parks with its new execution and is queued.
		if _, err := parkStore(t, e).HoldDestination(e.ctx, "hubspot", "ops", "upgrade", e.clock.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		again := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("2"))
		wantOutcome(t, again, keystore.OutcomeParked)
		if again.Record.Reason != "" || !strings.HasSuffix(again.Record.ResumeURL, "/2") {
			t.Fatalf("re-parked: reason %q, resume URL %q", again.Record.Reason, again.Record.ResumeURL)
		}
		if got := parkedKeys(t, e, "hubspot"); len(got) != 1 || got[0] != "evt_1" {
			t.Fatalf("the re-sent key is not queued: %v", got)
		}
		e2 := setup(t, newStore, pol)
		openHubspot(t, e2)
		p = e2.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		e2.clock.Advance(time.Minute)
		claim(t, e2, "evt_1")
		if _, err := parkStore(t, e2).ResumeAnswered(e2.ctx, ns, "evt_1", *p.Record.ParkedAt, keystore.ResumeLost, "404"); err != nil {
			t.Fatal(err)
		}
		if _, err := e2.s.ResetBreaker(e2.ctx, "hubspot", "ops", "hubspot confirmed fixed"); err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, e2.reserve(ns, "evt_1", withDest("hubspot")), keystore.OutcomeAccepted)
	})
	t.Run("guards racing for one parked key: exactly one claims it", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		e.clock.Advance(time.Minute)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := parkStore(t, e).ClaimResume(e.ctx, ns, "evt_1", 30*time.Second)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d claims won, want exactly 1", wins.Load())
		}
	})
	t.Run("copies racing on a parked key being resumed: exactly one accepted", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		e.clock.Advance(time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatal("no claim")
		}
		var accepted, other atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				res, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", Destination: "hubspot", ResumeURL: fmt.Sprintf("%s%d", resumeBase, i)})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Outcome == keystore.OutcomeAccepted {
					accepted.Add(1)
				} else {
					other.Add(1)
				}
			}(i)
		}
		wg.Wait()
		if accepted.Load() != 1 || other.Load() != 19 {
			t.Fatalf("accepted %d, others %d; want exactly one accepted", accepted.Load(), other.Load())
		}
	})
	t.Run("a maintenance window parks events and they catch up after it", func(t *testing.T) {
		e := setup(t, newStore, pol)
		ps := parkStore(t, e)
		until := e.clock.Now().Add(10 * time.Minute)
		for _, bad := range []struct {
			by, reason string
			until      time.Time
		}{
			{"", "CRM upgrade", until}, {"ops", " ", until}, {"ops", "CRM upgrade", e.clock.Now().Add(-time.Second)},
		} {
			_, err := ps.HoldDestination(e.ctx, "hubspot", bad.by, bad.reason, bad.until)
			wantCode(t, err, errs.InvalidRequest)
		}
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerClosed {
			t.Fatalf("a refused window changed the breaker: %+v", b)
		}
		b, err := ps.HoldDestination(e.ctx, "hubspot", "ops", "CRM upgrade", until)
		if err != nil || b.State != keystore.BreakerOpen || b.ReopensAt == nil || !b.ReopensAt.Equal(until) {
			t.Fatalf("hold: %+v %v", b, err)
		}
		if l := breaker(t, e, "hubspot"); l.State != keystore.BreakerOpen || !l.ReopensAt.Equal(until) {
			t.Fatalf("breaker list: %+v", l)
		}
		p := e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1"))
		wantOutcome(t, p, keystore.OutcomeParked)
		if keystore.CeilSeconds(p.RetryAfter) != 600 {
			t.Fatalf("expected back in %v, want the window's end", p.RetryAfter)
		}
		e.clock.Advance(5 * time.Minute)
		if claim(t, e, "evt_1") {
			t.Fatal("claimed during the window")
		}
		e.clock.Advance(6 * time.Minute)
		if !claim(t, e, "evt_1") {
			t.Fatal("not resumed after the window")
		}
		var msgs []string
		for _, ev := range e.events() {
			if ev.Kind == keystore.EventBreakerOpened {
				msgs = append(msgs, ev.Message)
			}
		}
		if len(msgs) != 1 || !strings.Contains(msgs[0], "ops") || !strings.Contains(msgs[0], "CRM upgrade") {
			t.Fatalf("breaker_opened events: %q", msgs)
		}
	})
	t.Run("a maintenance window shows who set it and why, and a person can end it early", func(t *testing.T) {
		e := setup(t, newStore, pol)
		ps := parkStore(t, e)
		_, err := ps.EndHold(e.ctx, "hubspot", "ops", "done early")
		wantCode(t, err, errs.NotFound)
		openHubspot(t, e)
		_, err = ps.EndHold(e.ctx, "hubspot", "ops", "done early")
		wantCode(t, err, errs.Conflict) // an outage is reset, not ended
		setAt := e.clock.Now().UTC().Truncate(time.Millisecond)
		until := e.clock.Now().Add(2 * time.Hour)
		if _, err := ps.HoldDestination(e.ctx, "hubspot", "ops: ana", "CRM upgrade to v9", until); err != nil {
			t.Fatal(err)
		}
		l := breaker(t, e, "hubspot")
		m := l.Maintenance
		if m == nil || m.By != "ops: ana" || m.Reason != "CRM upgrade to v9" || !m.SetAt.Equal(setAt) || !m.Until.Equal(until.UTC().Truncate(time.Millisecond)) {
			t.Fatalf("breaker list shows the window as %+v", m)
		}
		wantOutcome(t, e.reserve(ns, "evt_1", withDest("hubspot"), withResume("1")), keystore.OutcomeParked)
		for _, bad := range []struct{ by, reason string }{{"", "done"}, {"ops", "  "}, {"a\nb", "done"}} {
			_, err := ps.EndHold(e.ctx, "hubspot", bad.by, bad.reason)
			wantCode(t, err, errs.InvalidRequest)
		}
		if b := breaker(t, e, "hubspot"); b.Maintenance == nil || !b.ReopensAt.Equal(*l.ReopensAt) {
			t.Fatalf("a refused end changed the breaker: %+v", b)
		}
		if claim(t, e, "evt_1") {
			t.Fatal("claimed during the window")
		}
		e.clock.Advance(time.Minute)
		b, err := ps.EndHold(e.ctx, "hubspot", "ops: ana", "the upgrade finished early")
		if err != nil || b.Maintenance != nil || b.State != keystore.BreakerHalfOpen {
			t.Fatalf("end hold: %+v %v", b, err)
		}
		if l := breaker(t, e, "hubspot"); l.Maintenance != nil || l.State != keystore.BreakerHalfOpen {
			t.Fatalf("breaker list after the end: %+v", l)
		}
		if !claim(t, e, "evt_1") {
			t.Fatal("the parked key is not resumed (as the probe) after the window ended")
		}
		_, err = ps.EndHold(e.ctx, "hubspot", "ops", "again")
		wantCode(t, err, errs.Conflict)
	})
	t.Run("a failed probe after a window is an outage: the window is gone", func(t *testing.T) {
		e := setup(t, newStore, pol)
		ps := parkStore(t, e)
		if _, err := ps.HoldDestination(e.ctx, "hubspot", "ops", "CRM upgrade", e.clock.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(2 * time.Minute)
		r := e.reserve(ns, "evt_probe", withDest("hubspot"))
		wantOutcome(t, r, keystore.OutcomeAccepted)
		e.fail(ns, "evt_probe", r.Token, keystore.ReasonDestinationUnreachable)
		if b := breaker(t, e, "hubspot"); b.State != keystore.BreakerOpen || b.Maintenance != nil {
			t.Fatalf("after the failed probe: %+v", b)
		}
	})
	t.Run("bad resume_url is refused and changes nothing", func(t *testing.T) {
		e := setup(t, newStore, pol)
		openHubspot(t, e)
		for _, u := range []string{"ftp://x/y", "/webhook-waiting/1", "http://", "http://a/\nb"} {
			_, err := e.s.Reserve(e.ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_1", Destination: "hubspot", ResumeURL: u})
			wantCode(t, err, errs.InvalidRequest)
		}
		wantState(t, e.lookup(ns, "evt_1"), keystore.StateAbsent)
	})
}
