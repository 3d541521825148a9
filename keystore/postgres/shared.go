package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SharedSecret returns the secret called name that every replica on this
// database uses: the one already kept, or candidate, which is kept when
// none is (the first replica to start decides; later candidates are
// dropped). A secret is never replaced here.
func (s *Store) SharedSecret(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	if len(candidate) == 0 {
		return nil, fmt.Errorf("shared secret %s: an empty candidate", name)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO guard_shared_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, candidate); err != nil {
		return nil, fmt.Errorf("shared secret %s: %w", name, s.dbErr("keep secret", err))
	}
	v, found, err := readSecret(ctx, s.pool, name)
	if err == nil && !found {
		err = errors.New("kept, then not found") // deleted by hand between the two statements
	}
	if err != nil {
		return nil, fmt.Errorf("shared secret %s: %w", name, err)
	}
	return v, nil
}

func readSecret(ctx context.Context, pool *pgxpool.Pool, name string) ([]byte, bool, error) {
	var v []byte
	err := pool.QueryRow(ctx, `SELECT value FROM guard_shared_secrets WHERE name = $1`, name).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// ReadSharedSecret reads the secret called name from the database at url
// without opening a store (no migrations): for tools such as `n8n setup`
// that need what the running guards share. found is false when no guard
// has kept it yet (or the schema is older than version 11).
func ReadSharedSecret(ctx context.Context, url, name string) (value []byte, found bool, err error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, false, errors.New("read shared secret: the URL is not a valid postgres:// URL or connection string")
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("read shared secret %s: %w", name, err)
	}
	defer pool.Close()
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('guard_shared_secrets') IS NOT NULL`).Scan(&exists); err != nil {
		return nil, false, fmt.Errorf("read shared secret %s: %w", name, err)
	}
	if !exists {
		return nil, false, nil
	}
	return readSecret(ctx, pool, name)
}

// SignOut records that the console session id ended, for every replica,
// until expires; expired sign-outs are dropped on the way.
func (s *Store) SignOut(ctx context.Context, id string, expires time.Time) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO guard_console_signouts (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, id, expires)
	b.Queue(`DELETE FROM guard_console_signouts WHERE expires_at < clock_timestamp()`)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return s.dbErr("sign out", err)
	}
	return nil
}

// SignedOut reports whether the console session id was signed out on any
// replica.
func (s *Store) SignedOut(ctx context.Context, id string) (bool, error) {
	var ended bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM guard_console_signouts WHERE id = $1)`, id).Scan(&ended); err != nil {
		return false, s.dbErr("signed out", err)
	}
	return ended, nil
}
