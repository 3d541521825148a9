package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/internal/durable"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// newBackupCmd is `n8n-guard backup`: a consistent copy of the bbolt store
// file. By default it asks the running server (GET /v1/admin/backup),
// which copies while it serves. With --offline it opens the file in
// --data itself, which bbolt's file lock allows only while no server
// runs on it; the two never mix silently: a running server makes
// --offline fail, and an unreachable one makes the default fail.
func newBackupCmd(co *clientOptions) *cobra.Command {
	var out string
	var offline bool
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Write a consistent copy of the store file (while the server runs, or --offline)",
		Long: `Write a consistent copy of the bbolt store file to FILE.

By default the running server makes the copy (GET /v1/admin/backup, an admin
token: N8N_GUARD_TOKEN or <data>/api-token) while it goes on answering. With
--offline, no server may run on --data: the file is opened directly.

The copy is written to FILE.partial, synced, checked (the same check as
'n8n-guard store check') and only then renamed to FILE; an existing FILE is
never overwritten. Restore: docs/runbooks.md. A PostgreSQL store is backed
up with pg_dump (docs/postgres.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out FILE is required")
			}
			if _, err := os.Stat(out); err == nil {
				return fmt.Errorf("%s exists: a backup never overwrites a file; name a new one", out)
			}
			copyTo := func(w io.Writer) (int64, error) { return backupFromServer(cmd.Context(), co, w) }
			if offline {
				copyTo = func(w io.Writer) (int64, error) { return backupFromFile(cmd.Context(), co.data, w) }
			}
			rep, err := writeBackup(out, copyTo)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written to %s: %d bytes, %d keys, consistency check passed\n", out, rep.Size, rep.Keys)
			return nil
		},
	}
	co.addFlags(cmd)
	cmd.Flags().StringVar(&out, "out", "", "file to write the backup to (must not exist)")
	cmd.Flags().BoolVar(&offline, "offline", false, "copy the store file in --data directly; only while no server runs on it")
	return cmd
}

// writeBackup fills out.partial with copyTo, makes it durable, checks it
// and renames it to out.
func writeBackup(out string, copyTo func(io.Writer) (int64, error)) (bolt.CheckReport, error) {
	partial := out + ".partial"
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return bolt.CheckReport{}, fmt.Errorf("backup: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(partial)
		}
	}()
	if _, err := copyTo(f); err != nil {
		return bolt.CheckReport{}, fmt.Errorf("backup failed, nothing written to %s: %w", out, err)
	}
	if err := f.Sync(); err != nil {
		return bolt.CheckReport{}, fmt.Errorf("backup: sync %s: %w", partial, err)
	}
	if err := f.Close(); err != nil {
		return bolt.CheckReport{}, fmt.Errorf("backup: %w", err)
	}
	rep, err := bolt.Check(partial, time.Second)
	if err != nil {
		return rep, fmt.Errorf("backup: check the copy: %w", err)
	}
	if !rep.OK() {
		return rep, fmt.Errorf("backup failed, nothing written to %s: the copy does not pass the consistency check: %s", out, rep.Problems[0])
	}
	if err := os.Rename(partial, out); err != nil {
		return rep, fmt.Errorf("backup: %w", err)
	}
	ok = true
	return rep, durable.SyncDir(filepath.Dir(out))
}

// backupFromServer copies the running server's snapshot to w.
func backupFromServer(ctx context.Context, co *clientOptions, w io.Writer) (int64, error) {
	c, err := co.authed()
	if err != nil {
		return 0, err
	}
	n, err := c.Backup(ctx, w)
	if errors.Is(err, client.ErrUnreachable) {
		return n, fmt.Errorf("%w (when the server is stopped, use --offline)", err)
	}
	return n, err
}

// backupFromFile copies the store file in data with the store closed to
// everyone else: bolt.Open takes the file lock (and runs the same
// recovery a start would).
func backupFromFile(ctx context.Context, data string, w io.Writer) (int64, error) {
	path := filepath.Join(data, StoreFile)
	if _, err := os.Stat(path); err != nil {
		return 0, fmt.Errorf("no store file: %w", err)
	}
	s, err := bolt.Open(path, bolt.Options{LockTimeout: time.Second})
	if err != nil {
		return 0, fmt.Errorf("%w (a server runs on this data folder? leave out --offline to back up through it)", err)
	}
	var n int64
	err = s.Backup(ctx, func(_ int64, snap io.WriterTo) error {
		var err error
		n, err = snap.WriteTo(w)
		return err
	})
	return n, errors.Join(err, s.Close())
}
