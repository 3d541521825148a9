package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/internal/tune"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	pgstore "github.com/n8n-guard/n8n-guard/keystore/postgres"
)

// serve runs the real HTTP API (package api, the same routes, validation,
// auth and metrics as n8n-guard serve) over the store named by --store:
// a postgres:// URL or a bbolt file path. It leaves out what the service
// adds around the API (notify, the periodic sweeper), so both backends
// are measured in exactly the same harness.
func serve(args []string) error {
	fs := flag.NewFlagSet("guard-bench serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	store := fs.String("store", "", "postgres://… URL, or the path of a bbolt file")
	token := fs.String("token", os.Getenv("N8N_GUARD_TOKEN"), "API token to accept (default $N8N_GUARD_TOKEN)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *store == "" || *token == "" {
		return errors.New("--store and --token are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var st keystore.Store
	var err error
	if strings.HasPrefix(*store, "postgres://") || strings.HasPrefix(*store, "postgresql://") {
		st, err = pgstore.Open(ctx, *store, pgstore.Options{Logger: log})
	} else {
		tune.Procs() // as n8n-guard serve does
		st, err = bolt.Open(*store, bolt.Options{Logger: log})
	}
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := api.New(api.Config{Store: st, Tokens: []string{*token}, Registry: prometheus.NewRegistry(),
		Logger: log, Version: "guard-bench"})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
