package rerun_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// stopsWhileListing is a PostgreSQL-like store (strictWrites: writes fail
// on an ended context) on which the guard is told to stop (SIGTERM) while
// it lists the execution's other keys at the gate (grantSiblings): the
// query fails with the context's error, as pgx's does.
type stopsWhileListing struct {
	strictWrites
	stop context.CancelFunc
}

func (s stopsWhileListing) List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error) {
	s.stop()
	return keystore.Page{}, ctx.Err()
}

// A guard stopped before it asked n8n must leave a person's grant as it
// is (handed back, or lapsing to be claimed again), never turn it into a
// refusal: the stop is not an answer. Since h16-rerun's note outlives the
// context, the refusal that grantSiblings' context error leads to is
// written on PostgreSQL.
func TestAGuardStoppedWhileGrantingTheSiblingsDoesNotRefuseTheGrant(t *testing.T) {
	e := setup(t)
	e.atGate("own", "41", "crm")
	e.grant("own")
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	f := newN8n(func(id string) (string, error) { return "new-" + id, nil })
	r, err := rerun.New(stopsWhileListing{strictWrites{e.store}, stop}, f,
		rerun.Options{Reads: -1, Pace: time.Millisecond, Interval: time.Hour, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	rerun.Round(ctx, r)
	if got := f.retries(); len(got) != 0 {
		t.Fatalf("n8n was asked %v by a stopping guard", got)
	}
	if l := e.last("own"); l.Event == keystore.HistoryRerunRefused {
		t.Fatalf("the grant was refused because the guard stopped: %+v", l)
	}
}
