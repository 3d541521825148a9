package bolt

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"go.etcd.io/bbolt"
)

// withDefaults fills in every default of Options, as their comments say:
// the one place they are applied (Open). A zero or negative number is the
// default.
func (o Options) withDefaults() Options {
	o.LockTimeout = cmp.Or(max(o.LockTimeout, 0), 2*time.Second)
	o.MaxBatch = cmp.Or(max(o.MaxBatch, 0), 2048)
	o.SweepBatch = cmp.Or(max(o.SweepBatch, 0), 1000)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry == nil {
		o.Retry = func() backoff.BackOff {
			b := backoff.NewExponentialBackOff()
			b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 10*time.Second
			return b
		}
	}
	if o.commit == nil {
		o.commit = (*bbolt.Tx).Commit
	}
	return o
}
