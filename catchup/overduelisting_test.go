package catchup_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// failingWaits is a store whose listings by wait fail.
type failingWaits struct{ *bolt.Store }

func (failingWaits) ParkedByWait(context.Context, keystore.WaitQuery) ([]*keystore.Record, error) {
	return nil, errors.New("disk on fire")
}

// An overdue pass that cannot list the parked keys says so: a store that
// fails every listing would otherwise report no overdue event, ever, and
// without a trace.
func TestAnOverduePassThatCannotListSaysSo(t *testing.T) {
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {ParkedLimit: time.Minute}}}
	store, clock := openOn(t, pol)
	var logs logbuf.Buffer
	r, err := catchup.New(catchup.Options{Store: failingWaits{store}, Policies: pol, Clock: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	catchup.OverduePasses(r, "crm")(context.Background(), clock.Now())
	if !strings.Contains(logs.String(), "cannot list the overdue parked keys") || !strings.Contains(logs.String(), "disk on fire") {
		t.Fatalf("the cut pass said nothing: %q", logs.String())
	}
}
