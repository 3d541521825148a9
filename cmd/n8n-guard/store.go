package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// checkChildEnv marks the child process of `store check` (see runCheck).
// The binary ignores it; a test binary runs main when it is set.
const checkChildEnv = "N8N_GUARD_STORE_CHECK_CHILD"

// newStoreCmd is `n8n-guard store`: offline tools for the bbolt file.
func newStoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "store",
		Short: "Offline tools for the bbolt store file",
	}
	var data, file string
	var inProcess bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Run bbolt's consistency check on the store file (the server must be stopped)",
		Long: `Run bbolt's consistency check on the store file, reading only.

The file is <data>/` + StoreFile + `, or --file (a backup, say). No server may
have it open: the check refuses while one holds the file lock. It first
compares the file's size with the pages its header names (a truncated file),
then walks every page. Exits non-zero and names the problems when it finds
any; what to do then is in docs/runbooks.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path := file
			if path == "" {
				path = filepath.Join(data, StoreFile)
			}
			if inProcess {
				return checkInProcess(cmd.OutOrStdout(), path)
			}
			return runCheck(cmd.OutOrStdout(), path)
		},
	}
	fs := check.Flags()
	fs.StringVar(&data, "data", DefaultDataDir, "data folder whose store file is checked")
	fs.StringVar(&file, "file", "", "check this file instead of the one in --data")
	fs.BoolVar(&inProcess, "in-process", false, "walk the pages in this process (a damaged page can crash it)")
	fs.MarkHidden("in-process")
	bindEnv(fs, "data", "N8N_GUARD_DATA")
	cmd.AddCommand(check)
	return cmd
}

// runCheck runs the check in a child process of this binary. bbolt's page
// walk ends the whole process on some damage (a panic in a goroutine of
// its own, or a fault on the memory map); in a child, that is one more
// finding, reported with the way out, instead of a crash of the command.
func runCheck(stdout io.Writer, path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("store check: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("store check: %w", err)
	}
	var stderr bytes.Buffer
	child := exec.Command(exe, "store", "check", "--in-process", "--file", path)
	child.Env = append(os.Environ(), checkChildEnv+"=1")
	child.Stdout, child.Stderr = stdout, &stderr
	err = child.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		// The child's own answer (damage found, or the file in use).
		return errors.New(strings.TrimPrefix(strings.TrimSpace(stderr.String()), "n8n-guard: "))
	case errors.As(err, &exit):
		first, _, _ := strings.Cut(strings.TrimSpace(stderr.String()), "\n")
		return fmt.Errorf("%s is damaged: bbolt's page walk crashed on it (%s, %v). %s", path, first, err, wayOut)
	}
	return fmt.Errorf("store check: run %s: %w", exe, err)
}

// wayOut is what to do about a damaged store file.
const wayOut = "Keep the damaged file for inspection, restore the last good backup into the data folder, and let the senders' retries bring what came after it (docs/runbooks.md, \"The store file is damaged\")."

func checkInProcess(stdout io.Writer, path string) error {
	rep, err := bolt.Check(path, time.Second)
	if errors.Is(err, bolt.ErrInUse) {
		return fmt.Errorf("%s: %w. Stop the server first, or check a copy: n8n-guard backup --out copy.db; n8n-guard store check --file copy.db", path, err)
	}
	if err != nil {
		return fmt.Errorf("store check %s: %w", path, err)
	}
	if rep.OK() {
		fmt.Fprintf(stdout, "%s: ok (%d bytes, page size %d, transaction %d, %d keys)\n", path, rep.Size, rep.PageSize, rep.TxID, rep.Keys)
		return nil
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(stdout, "%s: %s\n", path, p)
	}
	for _, k := range rep.Damaged {
		fmt.Fprintf(stdout, "%s: damaged record: %s\n", path, k)
	}
	more := ""
	if rep.Truncated {
		more = " (and more not shown)"
	}
	return fmt.Errorf("%s is damaged: %d problems found%s, the first: %s. %s", path, len(rep.Problems), more, rep.Problems[0], wayOut)
}
