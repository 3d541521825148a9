package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// runTill runs a runner with opts until done says what the test needs
// has happened (looked at every 5 ms), then stops it. Tests on a
// controlled clock use it instead of a span of real time: a loaded
// machine gets there later, not less far. The limit only turns a runner
// that never gets there into a failure.
func runTill(t *testing.T, opts catchup.Options, what string, done func() bool) {
	t.Helper()
	r, err := catchup.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- r.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	testwait.Within(t, 2*time.Minute, what, done)
}
