//go:build unix

// Command guard-check is the soak form of the linearizability check
// (internal/chaos): it builds the guard, runs clients and random faults
// against each store for as long as asked, checks every key's history
// against the model (internal/linearize) and prints one summary per store.
// Run it from the repository (it calls go build); docs/verification.md.
//
//	go run ./cmd/guard-check -duration 10m
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/chaos"
)

func main() {
	duration := flag.Duration("duration", 10*time.Minute, "how long the clients call each store")
	seed := flag.Uint64("seed", 0, "the seed of the clients' choices and the faults' schedule (0: a random one, printed)")
	stores := flag.String("stores", "bbolt,postgres,postgres-failover", "the stores to check, comma-separated: bbolt, postgres (three guards, one through PgBouncer), postgres-failover (a primary and a synchronous standby)")
	clients := flag.Int("clients", 8, "concurrent clients")
	verbose := flag.Bool("v", false, "print each fault as it is injected")
	flag.Parse()
	if *seed == 0 {
		*seed = rand.Uint64() % 1_000_000_000
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *duration, *seed, strings.Split(*stores, ","), *clients, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "guard-check:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, d time.Duration, seed uint64, stores []string, clients int, verbose bool) error {
	dir, err := os.MkdirTemp("", "guard-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := chaos.Build(ctx, dir)
	if err != nil {
		return err
	}
	const lease = 2 * time.Second
	failed := false
	for _, store := range stores {
		sdir, err := os.MkdirTemp(dir, store+"-")
		if err != nil {
			return err
		}
		var s *chaos.Stack
		switch store {
		case "bbolt":
			s, err = chaos.Bolt(ctx, bin, sdir, lease)
		case "postgres":
			s, err = chaos.Postgres(ctx, bin, sdir, lease)
		case "postgres-failover":
			s, err = chaos.PostgresFailover(ctx, bin, sdir, lease)
		default:
			return fmt.Errorf("unknown store %q (bbolt, postgres, postgres-failover)", store)
		}
		if errors.Is(err, chaos.ErrSkip) {
			fmt.Printf("%s: SKIPPED: %v\n", store, err)
			failed = true
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", store, err)
		}
		vis, err := os.MkdirTemp("", "n8n-guard-check-")
		if err != nil {
			s.Close()
			return err
		}
		cfg := chaos.Config{Store: store, Seed: seed, Clients: clients, Duration: d, Lease: lease,
			KeyOps: 30, ActiveKeys: 6, Guards: s.Guards, Nemeses: s.Nemeses,
			FaultMin: 1500 * time.Millisecond, FaultMax: 4 * time.Second, Token: chaos.Token, VisDir: vis, N8n: s.N8n}
		if verbose {
			cfg.Log = os.Stderr
		}
		sum := chaos.Run(ctx, cfg)
		s.Close()
		fmt.Println(sum)
		if sum.OK() {
			os.RemoveAll(vis)
		} else {
			failed = true
			fmt.Printf("%s: replay with -seed %d; faults: %s\n", store, seed, strings.Join(sum.FaultLog, "; "))
		}
	}
	if failed {
		return errors.New("the check failed or a store was skipped")
	}
	return nil
}
