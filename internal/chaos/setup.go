//go:build unix

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
)

// Token is the API token the guards of a run accept.
const Token = "chaos-check-token"

// Stack is the processes of one store under test.
type Stack struct {
	N8n     *StandInN8n // where parked keys are resumed
	Guards  []*Guard
	Nemeses []Nemesis
	close   []func()
}

// Close stops everything the stack started, newest first.
func (s *Stack) Close() {
	for i := len(s.close) - 1; i >= 0; i-- {
		s.close[i]()
	}
}

func guardEnv(dir string, lease time.Duration, n *StandInN8n, extra ...string) ([]string, error) {
	cfg := filepath.Join(dir, "guard.yaml")
	if err := os.WriteFile(cfg, []byte(GuardConfig(lease)), 0o644); err != nil {
		return nil, err
	}
	return append([]string{"N8N_GUARD_TOKENS=" + Token, "N8N_GUARD_CONFIG=" + cfg, "N8N_GUARD_DATA=" + filepath.Join(dir, "data"),
		// The sweeper moves expired leases to unknown while the clients
		// watch, not once a minute.
		"N8N_GUARD_SWEEP_INTERVAL=1s", "N8N_GUARD_LOG_LEVEL=warn", "N8N_GUARD_RESUME_ORIGINS=" + n.Origin}, extra...), nil
}

// Bolt is one guard on a bbolt file, and the faults of its process.
func Bolt(ctx context.Context, bin, dir string, lease time.Duration) (*Stack, error) {
	n, err := NewStandInN8n()
	if err != nil {
		return nil, err
	}
	env, err := guardEnv(dir, lease, n)
	if err != nil {
		n.Close()
		return nil, err
	}
	g, err := NewGuard("bolt", bin, env)
	if err != nil {
		n.Close()
		return nil, err
	}
	s := &Stack{N8n: n, Guards: []*Guard{g}, close: []func(){n.Close, g.Close}}
	if err := g.Start(ctx); err != nil {
		return nil, err
	}
	s.Nemeses = GuardNemeses(s.Guards, lease)
	return s, nil
}

// ErrSkip wraps what is missing for a stack (PostgreSQL, PgBouncer).
var ErrSkip = errors.New("not installed")

// Postgres is three guards on one PostgreSQL database, two connected
// directly and one through PgBouncer in transaction mode, and the faults
// of their processes, of PostgreSQL (pg_ctl restart -m fast and -m
// immediate) and of PgBouncer (a restart).
func Postgres(ctx context.Context, bin, dir string, lease time.Duration) (*Stack, error) {
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
	// Durable: fsync and synchronous_commit on, as in production. Without
	// them `pg_ctl restart -m immediate` loses commits the guards had
	// acknowledged, and the check says so (docs/verification.md).
	c, err := pgtest.Start(pgtest.Options{Durable: true})
	if errors.Is(err, pgtest.ErrNoPostgres) {
		return nil, fmt.Errorf("%w: %v", ErrSkip, err)
	}
	if err != nil {
		return nil, err
	}
	s.close = append(s.close, func() { c.Stop() })
	b, err := pgtest.StartBouncer(c.URL)
	if errors.Is(err, pgtest.ErrNoPgBouncer) {
		return nil, fmt.Errorf("%w: %v", ErrSkip, err)
	}
	if err != nil {
		return nil, err
	}
	s.close = append(s.close, func() { b.Stop() })
	via, err := pgtest.NewDatabase(ctx, c.URL, b.URL, "chaos")
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(c.URL)
	u.Path = "/chaos"
	direct := u.String()
	for i, store := range []string{direct, direct, via} {
		name := fmt.Sprintf("pg%d", i+1)
		if store == via {
			name += "-pgbouncer"
		}
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
	s.Nemeses = append(GuardNemeses(s.Guards, lease),
		Nemesis{Name: "pg_ctl restart -m fast", Do: func(context.Context, *rand.Rand) error { return c.Restart("fast") }},
		Nemesis{Name: "pg_ctl restart -m immediate", Do: func(context.Context, *rand.Rand) error { return c.Restart("immediate") }},
		Nemesis{Name: "PgBouncer restart", Do: func(context.Context, *rand.Rand) error { return b.Restart() }},
	)
	ok = true
	return s, nil
}
