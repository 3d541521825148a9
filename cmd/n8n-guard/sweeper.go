package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// DefaultSweepInterval is how often expired leases and records are swept.
const DefaultSweepInterval = time.Minute

// sweeper runs Store.Sweep on a timer: leases that ran out become unknown
// (and alert their owner) even when nobody reserves the key again, and
// finished records leave after their retention.
type sweeper struct {
	store keystore.Store
	every time.Duration
	log   *slog.Logger
}

func (s sweeper) Run(ctx context.Context) error {
	t := time.NewTicker(s.every) // Config.withDefaults filled it in
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		st, err := s.store.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil
		case err != nil:
			// A failed sweep is retried at the next tick; the store stays usable.
			s.log.Error("sweep failed", "err", err)
		case st.Expired+st.LeasesExpired+st.Events > 0:
			s.log.Info("swept", "records_expired", st.Expired, "leases_expired", st.LeasesExpired,
				"events_deleted", st.Events, "longest_tx", st.LongestTx)
		}
	}
}
