package keystore_test

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
)

// The child half of TestCrashKeepsAcceptedReservations: reserve unique keys
// from many goroutines and print each key the store answered accepted.
func TestMain(m *testing.M) {
	if path := os.Getenv("KEYSTORE_CRASH_CHILD"); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

func crashChild(path string) {
	s, err := keystore.OpenBolt(path, keystore.BoltOptions{})
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
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "KEYSTORE_CRASH_CHILD="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	sc := bufio.NewScanner(stdout)
	deadline := time.Now().Add(1500 * time.Millisecond)
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
			acked = append(acked, k)
		}
		if time.Now().After(deadline) && len(acked) > 500 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Keys printed between our last read and the kill are acknowledged too.
	for sc.Scan() {
		if k, ok := strings.CutPrefix(sc.Text(), "ACK "); ok {
			acked = append(acked, k)
		}
	}
	_ = cmd.Wait()
	if len(acked) < 500 {
		t.Fatalf("child acknowledged only %d reservations", len(acked))
	}
	s, err := keystore.OpenBolt(path, keystore.BoltOptions{})
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

// A second process on the same data folder gets a clear error, not a hang.
func TestSecondProcessGetsClearError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n8n-guard.db")
	s, err := keystore.OpenBolt(path, keystore.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = keystore.OpenBolt(path, keystore.BoltOptions{LockTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Fatalf("second open: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("second open hung")
	}
}
