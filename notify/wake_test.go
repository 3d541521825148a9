package notify_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// A fixed list of events is never written to: nothing commits.
func (events) Commits() (<-chan struct{}, func()) { return nil, func() {} }

// A key resolved anywhere (the API, the console, the CLI) is a commit of
// the store, which wakes the worker: the key's Slack message says who
// decided within moments, although the worker's interval is an hour.
func TestAKeyResolvedAnywhereUpdatesSlackWithoutWaitingForATick(t *testing.T) {
	slack := slacktest.New(t)
	h := newHarness(t, slack, decisionConfig(), func(o *harnessOptions) { o.PollInterval = time.Hour })
	ks, err := bolt.Open(filepath.Join(t.TempDir(), "keys.db"), bolt.Options{Clock: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	h.wireKeys(ks, ks)
	k := &keysHarness{harness: h, slack: slack, ks: ks}
	k.unknownKey("booking-1") // posted by a worker round of the test's own

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- h.svc.Run(ctx) }()
	defer func() { cancel(); <-stopped }()
	time.Sleep(300 * time.Millisecond) // its first round is done: it waits for the hour

	if _, err := ks.Resolve(ctx, keystore.ResolveRequest{Namespace: "bookings", Key: "booking-1",
		Resolution: keystore.StateCompleted, By: "office manager", Note: "found it in the CRM"}); err != nil {
		t.Fatal(err)
	}
	testwait.Value(t, 5*time.Second, "the message updated within 5 s of the resolve", func() ([]slacktest.Call, bool) {
		u := k.calls("chat.update")
		return u, len(u) == 1 && strings.Contains(u[0].Blocks, "office manager marked it *completed*")
	})
}
