//go:build unix

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
)

// PostgresFailover is two guards on a primary with a synchronous standby,
// connected through one multi-host connection string with
// target_session_attrs=read-write, as on a managed database. Its fault
// beside the guards' own: the primary crashes (pg_ctl stop -m immediate)
// and the standby is promoted; then a new standby is copied from the new
// primary onto the crashed one's port and made synchronous, so the next
// failover finds one.
func PostgresFailover(ctx context.Context, bin, dir string, lease time.Duration) (*Stack, error) {
	n, err := NewStandInN8n()
	if err != nil {
		return nil, err
	}
	s := &Stack{N8n: n, close: []func(){n.Close}}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	primary, err := pgtest.Start(pgtest.Options{Durable: true})
	if errors.Is(err, pgtest.ErrNoPostgres) {
		return nil, fmt.Errorf("%w: %v", ErrSkip, err)
	}
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	servers := []*pgtest.Cluster{primary}
	s.close = append(s.close, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range servers {
			c.Stop()
		}
	})
	standby, err := primary.StartStandby("standby", 0)
	if err != nil {
		return nil, err
	}
	servers = append(servers, standby)
	if err := primary.MakeSynchronous(ctx, "standby"); err != nil {
		return nil, err
	}
	if err := execOn(ctx, primary.URL, "CREATE DATABASE chaos"); err != nil {
		return nil, err
	}
	store := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/chaos?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.Port, standby.Port)
	for i := range 2 {
		name := fmt.Sprintf("pg%d", i+1)
		gdir := filepath.Join(dir, name)
		if err := os.MkdirAll(gdir, 0o755); err != nil {
			return nil, err
		}
		env, err := guardEnv(gdir, lease, n, "N8N_GUARD_STORE="+store)
		if err != nil {
			return nil, err
		}
		g, err := NewGuard(name, bin, env)
		if err != nil {
			return nil, err
		}
		s.Guards = append(s.Guards, g)
		s.close = append(s.close, g.Close)
		if err := g.Start(ctx); err != nil {
			return nil, err
		}
	}
	failover := func(ctx context.Context, _ *rand.Rand) error {
		mu.Lock()
		defer mu.Unlock()
		old, next := servers[len(servers)-2], servers[len(servers)-1]
		if err := old.Crash(); err != nil {
			return err
		}
		if err := next.Promote(ctx); err != nil {
			return err
		}
		port := old.Port
		old.Stop() // removes the crashed primary's files
		fresh, err := next.StartStandby("standby", port)
		if err != nil {
			return fmt.Errorf("new standby: %w", err)
		}
		servers = append(servers, fresh)
		return next.MakeSynchronous(ctx, "standby")
	}
	s.Nemeses = append(GuardNemeses(s.Guards, lease), Nemesis{Name: "failover", Do: failover}, Nemesis{Name: "failover", Do: failover})
	ok = true
	return s, nil
}

func execOn(ctx context.Context, url, sql string) error {
	return pgtest.Exec(ctx, url, sql)
}
