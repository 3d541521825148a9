// Package migrate applies a schema to PostgreSQL: a list of numbered SQL
// files (NNNN_name.sql), applied in order, each once, at start. Every
// PostgreSQL schema of n8n-guard (the keystore's, the notify outbox's) goes
// through this one runner.
//
// A file is never edited after it has shipped; a change is a new file. A
// database whose schema is newer than the binary is refused, never
// "downgraded".
package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema is one set of migrations and where its progress is recorded.
type Schema struct {
	Name  string // what the schema is for, in messages ("keystore")
	Files fs.FS  // the NNNN_name.sql files, at its root
	Table string // the table recording the applied versions
	// Lock is the advisory lock that makes replicas starting at the same
	// moment apply the migrations one after the other.
	Lock int64
}

type migration struct {
	version int
	name    string
	sql     string
}

func (s Schema) load() ([]migration, error) {
	entries, err := fs.ReadDir(s.Files, ".")
	if err != nil {
		return nil, fmt.Errorf("%s migrations: %w", s.Name, err)
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || !strings.HasSuffix(e.Name(), ".sql") {
			return nil, fmt.Errorf("%s migration file %s is not named NNNN_name.sql", s.Name, e.Name())
		}
		b, err := fs.ReadFile(s.Files, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("%s migration %s: versions must run 1, 2, 3, ... without gaps", s.Name, m.name)
		}
	}
	return out, nil
}

// Run applies the missing migrations of s in one transaction under s.Lock:
// DDL is transactional in PostgreSQL, so a failed migration leaves the
// schema as it was. log (may be nil) gets one line per applied file.
func Run(ctx context.Context, pool *pgxpool.Pool, s Schema, log *slog.Logger) error {
	migrations, err := s.load()
	if err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.Name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.Lock); err != nil {
		return fmt.Errorf("migrate %s: lock: %w", s.Name, err)
	}
	table := pgx.Identifier{s.Table}.Sanitize()
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("migrate %s: %w", s.Name, err)
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+table).Scan(&current); err != nil {
		return fmt.Errorf("migrate %s: %w", s.Name, err)
	}
	if current > len(migrations) {
		return fmt.Errorf("the database's %s schema is version %d, newer than this n8n-guard knows (%d): run a newer n8n-guard", s.Name, current, len(migrations))
	}
	for _, m := range migrations[current:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate %s: %s: %w", s.Name, m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			return fmt.Errorf("migrate %s: %s: %w", s.Name, m.name, err)
		}
		if log != nil {
			log.Info("applied schema migration", "schema", s.Name, "version", m.version, "name", m.name)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", s.Name, err)
	}
	return nil
}
