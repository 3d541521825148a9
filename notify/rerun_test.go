package notify_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	n8nclient "github.com/n8n-guard/n8n-guard/n8n"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// kicks stands in for the re-run worker (rerun.Runner).
type kicks struct{ n atomic.Int32 }

func (k *kicks) Kick() { k.n.Add(1) }

// failedAt makes a failed, retryable key of execution owner; atGate:
// the execution then stopped at its re-run gate.
func (k *keysHarness) failedAt(key, owner string, atGate bool) {
	k.t.Helper()
	k.failedIn("orders", key, owner, atGate)
}

// failedIn is failedAt in namespace ns.
func (k *keysHarness) failedIn(ns, key, owner string, atGate bool) {
	k.t.Helper()
	ctx := context.Background()
	res, err := k.ks.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: owner})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		k.t.Fatalf("reserve %s: %v %v", key, res.Outcome, err)
	}
	if _, err := k.ks.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: res.Token, Reason: keystore.ReasonDestinationFailed}); err != nil {
		k.t.Fatal(err)
	}
	if !atGate {
		return
	}
	if res, err := k.ks.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: owner, Rerun: true}); err != nil || res.Outcome != keystore.OutcomeRerunNotGranted {
		k.t.Fatalf("the gate of %s: %v %v", key, res.Outcome, err)
	}
}

func (k *keysHarness) lastOf(key string) keystore.Transition {
	k.t.Helper()
	res, err := k.ks.Lookup(context.Background(), "orders", key)
	if err != nil || res.Record == nil {
		k.t.Fatalf("lookup %s: %v", key, err)
	}
	return res.Record.History[len(res.Record.History)-1]
}

// "Retry execution" on an execution guarded by `n8n guard`: n8n's own
// retry would fail again at the re-run gate, so the click allows the
// re-run of the execution's keys there and wakes the guard's re-run
// worker; an execution with no key at a gate is retried in n8n as before.
func TestRetryExecutionOfAnExecutionAtItsRerunGate(t *testing.T) {
	t.Run("keys wait at the gate: allowed, the worker woken, no retry in n8n", func(t *testing.T) {
		n8n := newFakeN8n(t)
		k := newKeysHarness(t)
		kick := &kicks{}
		k.setExecutions(n8nclient.Retrier{Client: n8nclient.New(n8n.srv.URL+"/api/v1", "n8n-key", 0)})
		k.setReruns(kick)
		owner := "n8n id-orders-sync exec 77" // failureBody's workflow id
		k.failedAt("order-1", owner, true)
		k.failedAt("order-2", owner, true)
		k.failedAt("order-3", "n8n id-orders-sync exec 78", true) // another execution
		a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "77"))
		k.pass()
		k.click("U0ORDERS", ActionRerun, a.NotificationID)

		if got := n8n.Retries(); len(got) != 0 {
			t.Fatalf("n8n was asked to retry %v: it would fail at the gate again", got)
		}
		for _, key := range []string{"order-1", "order-2"} {
			last := k.lastOf(key)
			if last.Event != keystore.HistoryRerunGranted || !strings.Contains(last.By, "(Slack U0ORDERS)") || !strings.Contains(last.Detail, "re-run from Slack") {
				t.Errorf("%s: %+v", key, last)
			}
		}
		if last := k.lastOf("order-3"); last.Event != keystore.HistoryRerunGate {
			t.Errorf("the key of another execution was allowed: %+v", last)
		}
		if kick.n.Load() != 1 {
			t.Fatalf("the re-run worker was woken %d times, want 1", kick.n.Load())
		}
		eph := k.calls("chat.postEphemeral")
		if len(eph) != 1 || !strings.Contains(eph[0].Text, "Re-run allowed for 2 events; the guard re-runs execution 77.") {
			t.Fatalf("the answer: %+v", eph)
		}
		if u := k.calls("chat.update"); len(u) != 1 || !strings.Contains(u[0].Blocks, "*allowed a re-run* of the execution") || strings.Contains(u[0].Raw, ActionRerun) {
			t.Fatalf("update: %+v", u)
		}
	})
	t.Run("no key at its gate: retried in n8n", func(t *testing.T) {
		n8n := newFakeN8n(t)
		k := newKeysHarness(t)
		kick := &kicks{}
		k.setExecutions(n8nclient.Retrier{Client: n8nclient.New(n8n.srv.URL+"/api/v1", "n8n-key", 0)})
		k.setReruns(kick)
		k.failedAt("order-1", "n8n id-orders-sync exec 77", false)
		a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "77"))
		k.pass()
		k.click("U0ORDERS", ActionRerun, a.NotificationID)
		if got := n8n.Retries(); len(got) != 1 || got[0] != "77 loadWorkflow=true" {
			t.Fatalf("n8n retries: %v", got)
		}
		if kick.n.Load() != 0 || k.lastOf("order-1").Event != keystore.HistoryFailed {
			t.Fatalf("a plain retry allowed a re-run: kicks %d, %+v", kick.n.Load(), k.lastOf("order-1"))
		}
		if u := k.calls("chat.update"); len(u) != 1 || !strings.Contains(u[0].Blocks, "new execution 977") {
			t.Fatalf("update: %+v", u)
		}
	})
}
