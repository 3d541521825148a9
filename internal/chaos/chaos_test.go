//go:build unix

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// SeedEnv replays a run: the seed of a failed run is printed with it.
const SeedEnv = "N8N_GUARD_CHECK_SEED"

// DurationEnv sets how long each store's bounded run makes calls.
const DurationEnv = "N8N_GUARD_CHECK_DURATION"

var buildOnce struct {
	sync.Once
	bin string
	err error
	dir string
}

// guardBinary builds the guard once per test binary.
func guardBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildOnce.dir, buildOnce.err = os.MkdirTemp("", "n8n-guard-chaos-bin-")
		if buildOnce.err == nil {
			buildOnce.bin, buildOnce.err = Build(context.Background(), buildOnce.dir)
		}
	})
	if buildOnce.err != nil {
		t.Fatal(buildOnce.err)
	}
	return buildOnce.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildOnce.dir != "" {
		os.RemoveAll(buildOnce.dir)
	}
	os.Exit(code)
}

func seed(t *testing.T) uint64 {
	if v := os.Getenv(SeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", SeedEnv, v)
		}
		return s
	}
	return rand.Uint64() % 1_000_000_000
}

func duration(t *testing.T, def time.Duration) time.Duration {
	if v := os.Getenv(DurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: want a duration", DurationEnv, v)
		}
		return d
	}
	return def
}

// check runs one bounded run on a stack and fails the test, naming the
// seed and the visualisation, when a history or an invariant fails.
func check(t *testing.T, store string, s *Stack, d time.Duration) {
	sd := seed(t)
	vis, err := os.MkdirTemp("", "n8n-guard-check-")
	if err != nil {
		t.Fatal(err)
	}
	sum := Run(context.Background(), Config{
		Store: store, Seed: sd, Clients: 8, Duration: d, Lease: 2 * time.Second,
		KeyOps: 30, ActiveKeys: 6, Guards: s.Guards, Nemeses: s.Nemeses,
		FaultMin: 1500 * time.Millisecond, FaultMax: 4 * time.Second, Token: Token, VisDir: vis, N8n: s.N8n,
	})
	t.Log(sum)
	if !sum.OK() {
		for _, g := range s.Guards {
			t.Logf("guard %s logged:\n%s", g.Name, tail(g.Logs.String()))
		}
		t.Logf("faults: %v", sum.FaultLog)
		t.Fatalf("%s: the check failed; replay with %s=%d (the faults' times follow the seed, the machine's timing does not)\n%s",
			store, SeedEnv, sd, sum)
	}
	os.RemoveAll(vis)
	if sum.Operations < 200 || len(sum.Faults) == 0 {
		t.Fatalf("the run did too little to prove anything: %s", sum)
	}
}

// Every history of key operations on one bbolt guard, through SIGKILL,
// SIGTERM and SIGSTOP longer than a lease, is explained by the model, and
// the invariants hold.
func TestCheckBolt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real guards under faults for about 40 seconds")
	}
	bin := guardBinary(t)
	s, err := Bolt(context.Background(), bin, t.TempDir(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(t, "bbolt", s, duration(t, 15*time.Second))
}

// The same on PostgreSQL: three guards (one through PgBouncer in
// transaction mode), with PostgreSQL restarts (fast and immediate) and a
// PgBouncer restart among the faults.
func TestCheckPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real guards and PostgreSQL under faults for about 50 seconds")
	}
	bin := guardBinary(t)
	s, err := Postgres(context.Background(), bin, t.TempDir(), 2*time.Second)
	if errors.Is(err, ErrSkip) && os.Getenv("CI") != "true" {
		msg := "SKIPPING the PostgreSQL linearizability check: " + err.Error()
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(t, "postgres", s, duration(t, 20*time.Second))
}

// Failover as managed databases do it: the primary crashes and its
// synchronous standby is promoted; two guards follow through a multi-host
// connection string (target_session_attrs=read-write) and lose no
// acknowledged operation.
func TestCheckPostgresFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real guards on a primary and a standby under faults for about 40 seconds")
	}
	bin := guardBinary(t)
	s, err := PostgresFailover(context.Background(), bin, t.TempDir(), 2*time.Second)
	if errors.Is(err, ErrSkip) && os.Getenv("CI") != "true" {
		msg := "SKIPPING the PostgreSQL failover check: " + err.Error()
		fmt.Fprintln(os.Stderr, "\n!!!", msg, "!!!")
		t.Skip(msg)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(t, "postgres failover", s, duration(t, 20*time.Second))
}
