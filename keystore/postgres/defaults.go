package postgres

import (
	"cmp"
	"log/slog"
)

// withDefaults fills in the defaults of Options, as their comments say:
// the one place they are applied (Open), but for MaxConns, which the URL
// may set too (Open). A zero or negative SweepBatch is the default.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.SweepBatch = cmp.Or(max(o.SweepBatch, 0), 1000)
	return o
}
