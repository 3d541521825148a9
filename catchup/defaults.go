package catchup

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
)

// withDefaults fills in every default of Options, as their comments say:
// the one place they are applied (New). A zero or negative duration is
// the default.
func (o Options) withDefaults() Options {
	o.Interval = cmp.Or(max(o.Interval, 0), time.Second)
	o.Claim = cmp.Or(max(o.Claim, 0), 2*time.Minute)
	o.Poll = cmp.Or(max(o.Poll, 0), o.Interval)
	o.Grace = cmp.Or(max(o.Grace, 0), calls.DefaultGrace)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Sleep == nil {
		o.Sleep = calls.Sleep
	}
	return o
}
