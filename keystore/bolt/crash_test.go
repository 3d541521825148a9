package bolt_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// The child half of TestCrashKeepsAcceptedReservations: reserve unique keys
// from many goroutines and print each key the store answered accepted.
func TestMain(m *testing.M) {
	if path := os.Getenv("KEYSTORE_CRASH_CHILD"); path != "" {
		crashChild(path)
		return
	}
	if path := os.Getenv("KEYSTORE_CRASH_MIXED"); path != "" {
		mixedChild(path)
		return
	}
	os.Exit(m.Run())
}

func crashChild(path string) {
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("evt_%d_%d", g, i)
				r, err := s.Reserve(context.Background(), keystore.ReserveRequest{Namespace: "crash", Key: key, Owner: "child"})
				if err != nil || r.Outcome != keystore.OutcomeAccepted {
					fmt.Fprintln(os.Stderr, "reserve:", err, r.Outcome)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintln(out, "ACK", key)
				out.Flush()
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
}

// A crash loses no reservation that was answered accepted: the child is
// SIGKILLed under load; every key it acknowledged must be on disk, and must
// not be accepted again.
func TestCrashKeepsAcceptedReservations(t *testing.T) {
	var acked []string
	path := runAndKill(t, "KEYSTORE_CRASH_CHILD", func(line string) int {
		if k, ok := strings.CutPrefix(line, "ACK "); ok {
			acked = append(acked, k)
		}
		return len(acked)
	})
	if len(acked) < 500 {
		t.Fatalf("child acknowledged only %d reservations", len(acked))
	}
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, k := range acked {
		r, err := s.Lookup(ctx, "crash", k)
		if err != nil || r.Record == nil || r.Record.State != keystore.StateReserved {
			t.Fatalf("acknowledged key %s lost after crash: %+v %v", k, r, err)
		}
	}
	for _, k := range acked[len(acked)-50:] {
		r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "crash", Key: k})
		if err != nil || r.Outcome != keystore.OutcomeInProgress {
			t.Fatalf("acknowledged key %s re-acceptable after crash: %s %v", k, r.Outcome, err)
		}
	}
	t.Logf("%d acknowledged reservations survived SIGKILL", len(acked))
}

// runAndKill starts this test binary as a child with env set to a fresh
// data path, hands each line the child prints to read (which answers how
// many acknowledgements it holds), SIGKILLs the child once it has run
// 1.5 s and acknowledged 500, reads what it printed up to the kill, and
// returns the path.
func runAndKill(t *testing.T, env string, read func(line string) int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for sc.Scan() {
		if read(sc.Text()) > 500 && time.Now().After(deadline) {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Lines printed between our last read and the kill are acknowledged too.
	for sc.Scan() {
		read(sc.Text())
	}
	_ = cmd.Wait()
	return path
}

// A second process on the same data folder gets a clear error, not a hang.
func TestSecondProcessGetsClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = bolt.Open(path, bolt.Options{LockTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second open: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("second open hung")
	}
}

// The child half of TestCrashKeepsEveryAnsweredChange: every kind of change (new
// keys, completions, failures that raise events, a breaker opening), each
// printed once the store has answered it.
func mixedChild(path string) {
	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	ack := func(state keystore.State, key string) {
		mu.Lock()
		fmt.Fprintln(out, "ACK", state, key)
		out.Flush()
		mu.Unlock()
	}
	die := func(what string, err error) {
		fmt.Fprintln(os.Stderr, what, err)
		os.Exit(3)
	}
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("m_%d_%d", g, i)
				req := keystore.ReserveRequest{Namespace: "mixed", Key: key, Owner: "child"}
				if i%4 == 3 {
					req.Destination = "crm"
				}
				r, err := s.Reserve(ctx, req)
				if err != nil {
					die("reserve", err)
				}
				if r.Outcome == keystore.OutcomeDestinationPaused {
					continue
				}
				if r.Outcome != keystore.OutcomeAccepted {
					die("reserve "+string(r.Outcome), nil)
				}
				var state keystore.State
				switch i % 4 {
				case 0:
					_, err = s.Complete(ctx, keystore.CompleteRequest{Namespace: "mixed", Key: key, Token: r.Token, Via: keystore.ViaPrimary})
					state = keystore.StateCompleted
				case 1:
					_, err = s.Fail(ctx, keystore.FailRequest{Namespace: "mixed", Key: key, Token: r.Token, Reason: keystore.ReasonOutcomeUnknown})
					state = keystore.StateUnknown
				case 2:
					state = keystore.StateReserved
				case 3:
					_, err = s.Fail(ctx, keystore.FailRequest{Namespace: "mixed", Key: key, Token: r.Token, Reason: keystore.ReasonDestinationFailed})
					state = keystore.StateFailed
				}
				if err != nil {
					die("change", err)
				}
				ack(state, key)
			}
		}(g)
	}
	wg.Wait()
}

// A crash loses no answered change of any kind: after SIGKILL under load
// the file holds the state the answers were given from — records, indexes,
// counts, events and their sequence, breakers.
func TestCrashKeepsEveryAnsweredChange(t *testing.T) {
	acked := map[string]keystore.State{}
	path := runAndKill(t, "KEYSTORE_CRASH_MIXED", func(line string) int {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "ACK" {
			acked[f[2]] = keystore.State(f[1])
		}
		return len(acked)
	})
	if len(acked) < 500 {
		t.Fatalf("child acknowledged only %d changes", len(acked))
	}

	s, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("reopen after crash: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	unknown := map[string]bool{}
	for k, want := range acked {
		r, err := s.Lookup(ctx, "mixed", k)
		if err != nil || r.Record == nil || r.Record.State != want {
			t.Fatalf("acknowledged %s of %s lost after crash: %+v %v", want, k, r.Record, err)
		}
		if want == keystore.StateUnknown {
			unknown[k] = true
		}
	}

	// Counts and the indexes agree with the records.
	byState := map[keystore.State]int{}
	var cursor string
	for {
		page, err := s.List(ctx, keystore.ListQuery{Namespace: "mixed", Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Items {
			byState[r.State]++
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	counts, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for st, n := range byState {
		if counts["mixed"][st] != n {
			t.Errorf("count of %s: %d, records: %d", st, counts["mixed"][st], n)
		}
	}
	for _, st := range []keystore.State{keystore.StateUnknown, keystore.StateFailed} {
		page, err := s.List(ctx, keystore.ListQuery{Namespace: "mixed", State: st, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(page.Items); n != min(byState[st], 1000) {
			t.Errorf("state index lists %d %s keys, records hold %d", n, st, byState[st])
		}
	}

	// Every acknowledged unknown has its event, sequence numbers run on
	// without reuse, and the breaker opened by the failures survived.
	var last uint64
	opened := false
	for after := uint64(0); ; {
		evs, err := s.Events(ctx, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if ev.Seq <= last {
				t.Fatalf("event seq %d after %d", ev.Seq, last)
			}
			last = ev.Seq
			delete(unknown, ev.Key)
			opened = opened || ev.Kind == keystore.EventBreakerOpened
		}
		after = last
	}
	if len(unknown) > 0 {
		t.Errorf("%d acknowledged unknown keys have no key_unknown event", len(unknown))
	}
	if !opened {
		t.Error("no breaker_opened event after the crash")
	}
	dests, err := s.Destinations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(dests) != 1 || dests[0].State == keystore.BreakerClosed {
		t.Errorf("breaker after the crash: %+v", dests)
	}
	r, err := s.Reserve(ctx, keystore.ReserveRequest{Namespace: "mixed", Key: "after-crash", Owner: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, keystore.FailRequest{Namespace: "mixed", Key: "after-crash", Token: r.Token, Reason: keystore.ReasonOutcomeUnknown}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(ctx, last, 10)
	if err != nil || len(evs) != 1 || evs[0].Key != "after-crash" || evs[0].Seq <= last {
		t.Fatalf("first event after the crash: %+v %v (last before: %d)", evs, err, last)
	}
	t.Logf("%d acknowledged changes survived SIGKILL; %d events", len(acked), last)
}
