package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/n8n-guard/n8n-guard/internal/pgtest"
)

// postgres starts a throwaway PostgreSQL cluster with production
// durability (fsync and synchronous_commit on), prints its URL and keeps
// it running until SIGINT/SIGTERM, then removes it: the database side of
// a side-by-side run, without touching any installed cluster.
func postgres(args []string) error {
	fs := flag.NewFlagSet("guard-bench postgres", flag.ContinueOnError)
	fast := fs.Bool("no-fsync", false, "fsync and synchronous_commit off (tests only: not a fair comparison)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := pgtest.Start(pgtest.Options{Durable: !*fast})
	if err != nil {
		return err
	}
	fmt.Printf("url %s\n", c.URL)
	fmt.Fprintf(os.Stderr, "throwaway PostgreSQL in %s (log: server.log); stop with Ctrl-C or SIGTERM\n", c.Dir())
	<-ctx.Done()
	return c.Stop()
}
