//go:build unix

package catchup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/catchup"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// The figure of an idle guard's catch-up runner (the catch-up and the
// approval resumer) with keys awaiting approval beside one with none: the
// CPU time the process spends in a span of wall time with nothing to do.
// Run with N8N_GUARD_FIGURES=1 (it takes about a minute):
//
//	N8N_GUARD_FIGURES=1 go test -count=1 -v -run TestFigureIdleApprovalCPU ./catchup/
func TestFigureIdleApprovalCPU(t *testing.T) {
	if os.Getenv("N8N_GUARD_FIGURES") == "" {
		t.Skip("a figure, not a test: set N8N_GUARD_FIGURES=1")
	}
	const span = 20 * time.Second
	for _, n := range []int{0, 2000} {
		pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {Approval: keystore.ApprovalPolicy{Required: true}}}}
		store, err := bolt.Open(filepath.Join(t.TempDir(), fmt.Sprint("guard", n, ".db")), bolt.Options{Policies: pol})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i := range n {
			if _, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: fmt.Sprintf("inv_%05d", i), Destination: "crm",
				RequestedBy: "ann", ResumeURL: fmt.Sprintf("http://127.0.0.1:9/webhook-waiting/%d", i), Fingerprint: fmt.Sprint("invoice ", i)}); err != nil {
				t.Fatal(err)
			}
		}
		runner, err := catchup.New(catchup.Options{Store: store, Policies: pol, Resumer: &n8n.ResumeCaller{Secret: "s3cret", Targets: targetsOf(t, "http://127.0.0.1:9")}})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		stopped := make(chan error, 1)
		go func() { stopped <- runner.Run(rctx) }()
		<-time.After(2 * time.Second) // the figure is of the runner after its start
		start := cpu()
		<-time.After(span)
		used := cpu() - start
		cancel()
		<-stopped
		store.Close()
		t.Logf("%d keys awaiting approval: %v CPU in %v idle (%.2f%% of a core)", n, used.Round(time.Millisecond), span, 100*float64(used)/float64(span))
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
