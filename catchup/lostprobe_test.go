package catchup_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
	bbolt "go.etcd.io/bbolt"
)

// The oldest parked execution was deleted in n8n before the CRM came
// back: it is the probe, n8n answers 404, and the destination is free at
// once. The 10 parked after it are caught up within 10 / rate and a few
// seconds, not after the lost probe's claim + lease (7 minutes here).
func TestALostProbeFreesTheDestinationAtOnce(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 10, CatchUpConcurrency: 3, UnreachableThreshold: 1}}}
	clock := &outageClock{}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()

	first, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_first", Destination: "crm"})
	if err != nil || first.Outcome != keystore.OutcomeAccepted {
		t.Fatalf("first: %+v %v", first, err)
	}
	if f, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_first", Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: srv.URL + "/webhook-waiting/0"}); err != nil || f.Outcome != keystore.OutcomeParked {
		t.Fatalf("first fail: %+v %v", f, err)
	}
	fake.keys["0"], fake.deleted["0"] = "evt_first", true // pruned by n8n meanwhile
	clock.Advance(2 * time.Millisecond)
	for i := 1; i <= 10; i++ {
		id, key := fmt.Sprint(i), fmt.Sprintf("evt_%02d", i)
		fake.keys[id] = key
		res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", ResumeURL: srv.URL + "/webhook-waiting/" + id})
		if err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve %s during the outage: %+v %v", key, res, err)
		}
	}
	clock.Advance(time.Hour) // the cooldown is over

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logs := &lines{}
	runner, err := catchup.New(catchup.Options{Store: store, Policies: pol, Clock: clock.Now, Logger: slog.New(logs),
		Resumer:  &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
		Interval: 50 * time.Millisecond, Claim: 2 * time.Minute, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	start := time.Now()
	go func() { stopped <- runner.Run(rctx) }()
	bound := time.Duration(10/pol.Destination("crm").CatchUpRate*float64(time.Second)) + 4*time.Second
	var written int
	if !testwait.Poll(bound-time.Since(start), func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		written = len(fake.crm)
		return written == 10
	}) {
		fake.mu.Lock()
		t.Fatalf("after %s (bound %s) %d of 10 in the CRM: resumed %v", time.Since(start).Round(time.Millisecond), bound, written, fake.calls)
	}
	t.Logf("10 parked events caught up %s after the lost probe", time.Since(start).Round(time.Millisecond))
	cancel()
	<-stopped
	fake.wg.Wait()
	lost, err := store.Lookup(ctx, ns, "evt_first")
	if err != nil || lost.Record.Reason != keystore.ReasonResumeLost {
		t.Fatalf("the lost probe: %+v %v", lost.Record, err)
	}
	if n := len(logs.matching("parked execution lost")); n != 1 {
		t.Errorf("%d lines about the lost execution, want 1", n)
	}
}

// The oldest parked record is damaged (a flipped byte): the catch-up
// skips it and resumes every intact key behind it; the damaged one is
// reported (the store's log line and event), never resumed.
func TestADamagedParkedRecordDoesNotStopTheCatchUp(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"crm": {Cooldown: time.Hour, CatchUpRate: 50, CatchUpConcurrency: 3, UnreachableThreshold: 1}}}
	clock := &outageClock{}
	storeLogs := &lines{}
	store, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{Policies: pol, Clock: clock.Now, Logger: slog.New(storeLogs)})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	fake, srv := startFakeN8n(t, store)
	defer srv.Close()
	first, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: "evt_00", Destination: "crm"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: "evt_00", Token: first.Token,
		Reason: keystore.ReasonDestinationUnreachable, ResumeURL: srv.URL + "/webhook-waiting/0"}); err != nil {
		t.Fatal(err)
	}
	fake.keys["0"] = "evt_00"
	for i := 1; i <= 5; i++ {
		clock.Advance(time.Millisecond)
		id, key := fmt.Sprint(i), fmt.Sprintf("evt_%02d", i)
		fake.keys[id] = key
		if res, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Destination: "crm", ResumeURL: srv.URL + "/webhook-waiting/" + id}); err != nil || res.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve %s: %+v %v", key, res, err)
		}
	}
	err = store.DB().Update(func(tx *bbolt.Tx) error {
		b, rk := tx.Bucket([]byte("keys")), []byte(ns+"\x00evt_00")
		v := bytes.Clone(b.Get(rk))
		v[len(v)-1] ^= 0x20
		return b.Put(rk, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logs := &lines{}
	looks := &passes{Store: store}
	runner, err := catchup.New(catchup.Options{Store: looks, Policies: pol, Clock: clock.Now, Logger: slog.New(logs),
		Resumer:  &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, srv.URL)},
		Interval: 20 * time.Millisecond, Claim: 5 * time.Second, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- runner.Run(rctx) }()
	var written int
	if !testwait.Poll(testwait.Deadline, func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		written = len(fake.crm)
		return written == 5
	}) {
		t.Fatalf("%d of the 5 intact keys caught up behind a damaged one; runner log %q", written, logs.matching(""))
	}
	// The damaged record still counts as parked (a count reads no
	// record), so a worker starts every interval and finds nothing: it
	// must not say "destination paused" each time.
	awaitMore(t, "15 looks of the catch-up worker", &looks.parked, 15)
	cancel()
	<-stopped
	fake.wg.Wait()
	if fake.woken["0"] != 0 {
		t.Error("the damaged key's execution was resumed")
	}
	if n := len(logs.matching("destination paused")); n != 1 {
		t.Errorf("%d \"destination paused\" lines for one outage, want 1: %q", n, logs.matching("destination paused"))
	}
	if n := len(storeLogs.matching("failed its checksum")); n != 1 {
		t.Errorf("%d log lines about the damaged record, want 1", n)
	}
	if n := len(logs.matching("cannot list")); n != 0 {
		t.Errorf("the runner could not list: %q", logs.matching("cannot list"))
	}
}
