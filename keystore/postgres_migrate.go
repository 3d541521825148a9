package keystore

import (
	"context"
	"embed"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The schema of the PostgreSQL store is a list of numbered SQL files,
// applied in order, each once, at start. A file is never edited after it
// has shipped; a change is a new file.
//
//go:embed migrations/*.sql
var pgMigrations embed.FS

// pgMigrationLock is the advisory lock that makes replicas starting at the
// same moment apply the migrations one after the other ("n8ng").
const pgMigrationLock = 0x6e386e67

type pgMigration struct {
	version int
	name    string
	sql     string
}

func loadPgMigrations() ([]pgMigration, error) {
	entries, err := pgMigrations.ReadDir("migrations")
	if err != nil {
		return nil, err
	}
	var out []pgMigration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s is not named NNNN_name.sql", e.Name())
		}
		b, err := pgMigrations.ReadFile(path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, pgMigration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must run 1, 2, 3, ... without gaps", m.name)
		}
	}
	return out, nil
}

// migratePostgres applies the missing migrations in one transaction under
// an advisory lock: DDL is transactional in PostgreSQL, so a failed
// migration leaves the schema as it was.
func migratePostgres(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	migrations, err := loadPgMigrations()
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgMigrationLock)); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS guard_schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM guard_schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("the database's schema is version %d, newer than this n8n-guard knows (%d): run a newer n8n-guard", current, len(migrations))
	}
	for _, m := range migrations[current:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO guard_schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return fmt.Errorf("migrate: %s: %w", m.name, err)
		}
		log.Info("applied schema migration", "version", m.version, "name", m.name)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
