package notify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	n8nclient "github.com/n8n-guard/n8n-guard/n8n"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// A Slack click allows only what its person may decide: "Retry execution"
// on an execution that waits at its re-run gate allows its keys only when
// the person may decide every namespace they are in (the namespace's
// owner, resolvers, escalation steps), as the API and the console refuse
// a token or a person another namespace with 403. Else nothing is allowed
// and the person is told why. Mutation: mayDecideAll answering "" lets
// the orders team allow the payments key.
func TestRetryExecutionAllowsOnlyNamespacesItsPersonDecides(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaces []string // of the execution's keys at the gate
		allowed    bool
	}{
		{"the person's own namespace", []string{"orders"}, true},
		{"another team's namespace", []string{"payments"}, false},
		{"their own and another team's: none", []string{"orders", "payments"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n8n := newFakeN8n(t)
			k := newKeysHarness(t)
			kick := &kicks{}
			k.setExecutions(n8nclient.Retrier{Client: n8nclient.New(n8n.srv.URL+"/api/v1", "n8n-key", 0)})
			k.setReruns(kick)
			owner := "n8n id-orders-sync exec 77"
			for _, ns := range tc.namespaces {
				k.failedIn(ns, ns+"-1", owner, true)
			}
			a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "77"))
			k.pass()
			k.click("U0ORDERS", ActionRerun, a.NotificationID)

			granted := 0
			for _, ns := range tc.namespaces {
				res, err := k.ks.Lookup(context.Background(), ns, ns+"-1")
				if err != nil {
					t.Fatal(err)
				}
				if last := res.Record.History[len(res.Record.History)-1]; last.Event == keystore.HistoryRerunGranted {
					granted++
				}
			}
			eph := k.calls("chat.postEphemeral")
			if got := n8n.Retries(); len(got) != 0 {
				t.Fatalf("n8n was asked to retry %v", got)
			}
			if tc.allowed {
				if granted != len(tc.namespaces) || kick.n.Load() != 1 {
					t.Fatalf("granted %d, kicks %d", granted, kick.n.Load())
				}
				return
			}
			if granted != 0 || kick.n.Load() != 0 {
				t.Fatalf("a person allowed keys of a namespace they may not decide: granted %d, kicks %d", granted, kick.n.Load())
			}
			if len(eph) != 1 || !strings.Contains(eph[0].Text, "Forbidden") || !strings.Contains(eph[0].Text, "namespace payments") ||
				!strings.Contains(eph[0].Text, "nothing changed") {
				t.Fatalf("the answer: %+v", eph)
			}
			if u := k.calls("chat.update"); len(u) != 0 {
				t.Fatalf("the message changed: %+v", u)
			}
		})
	}
}

// A failure's post names its workflow and execution in its sender's
// words: "Retry execution" is offered, and carried out, only for an
// execution n8n says is one of the workflow the failure names, by id and
// by name. Mutation: executionMismatch answering "" shows the button and
// retries the other workflow's execution.
func TestRetryExecutionOnlyOfTheFailuresOwnWorkflow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wf      string // the workflow n8n says execution 421 belongs to
		offered bool
	}{
		{"its own workflow", "id-orders-sync", true},
		{"another workflow's execution", "id-payments-charge", false},
		{"the id right, the name another's", "id-orders-sync-renamed", false},
		// A forged failure that leaves the name out is routed by id or to
		// the default owner, whatever workflow it is: no name, no Retry.
		{"the name left out", "id-orders-sync", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n8n := newFakeN8n(t)
			n8n.belongs("421", tc.wf)
			k := newKeysHarness(t)
			k.setExecutions(n8nclient.Retrier{Client: n8nclient.New(n8n.srv.URL+"/api/v1", "n8n-key", 0)})
			body := failureBody("orders-sync", "POST to CRM", "HTTP 503", "421")
			if tc.name == "the id right, the name another's" {
				body = strings.Replace(body, `"id":"id-orders-sync"`, `"id":"id-orders-sync-renamed"`, 1)
			}
			if tc.name == "the name left out" {
				body = strings.Replace(body, `"name":"orders-sync"`, `"name":""`, 1)
			}
			a := k.intake(body)
			k.pass()
			post := k.calls("chat.postMessage")[0]
			if strings.Contains(post.Raw, ActionRerun) != tc.offered {
				t.Fatalf("Retry execution offered: %v, want %v", !tc.offered, tc.offered)
			}
			// A click all the same (a button of an older message, a forged
			// payload): n8n is asked again, and refuses the same.
			k.click("U0ORDERS", ActionRerun, a.NotificationID)
			if got := n8n.Retries(); (len(got) == 1) != tc.offered {
				t.Fatalf("n8n retries %v, want one: %v", got, tc.offered)
			}
			if !tc.offered {
				eph := k.calls("chat.postEphemeral")
				// Without a name the click may be refused already as not
				// the routed person's: either way nothing changes.
				want := "is not one of workflow"
				if tc.name == "the name left out" {
					want = "nothing changed"
				}
				if len(eph) != 1 || !strings.Contains(eph[0].Text, want) || strings.Contains(eph[0].Text, "payments") {
					t.Fatalf("the answer: %+v", eph)
				}
			}
		})
	}
}

// Keys allowed already (in the console) still count as the execution's
// at its gate: a Slack click answers that the re-run is allowed, and n8n
// is not asked to retry an execution that would stop at the gate again.
// Mutation: gateNamespaces without the granted keys: n8n retries 77.
func TestRetryExecutionOfAnExecutionAllowedAlready(t *testing.T) {
	n8n := newFakeN8n(t)
	k := newKeysHarness(t)
	kick := &kicks{}
	k.setExecutions(n8nclient.Retrier{Client: n8nclient.New(n8n.srv.URL+"/api/v1", "n8n-key", 0)})
	k.setReruns(kick)
	owner := "n8n id-orders-sync exec 77"
	k.failedAt("order-1", owner, true)
	res, err := k.ks.Lookup(context.Background(), "orders", "order-1")
	if err != nil {
		t.Fatal(err)
	}
	rec := res.Record
	if _, err := k.ks.Resolve(context.Background(), keystore.ResolveRequest{Namespace: "orders", Key: "order-1", Resolution: keystore.StateFailed,
		Rerun: true, By: "ana (console)", Note: "allowed in the console", Attempt: rec.Attempt}); err != nil {
		t.Fatal(err)
	}
	a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "77"))
	k.pass()
	k.click("U0ORDERS", ActionRerun, a.NotificationID)
	if got := n8n.Retries(); len(got) != 0 {
		t.Fatalf("n8n was asked to retry %v", got)
	}
	if eph := k.calls("chat.postEphemeral"); len(eph) != 1 || !strings.Contains(eph[0].Text, "Re-run allowed for 1 event") {
		t.Fatalf("the answer: %+v", eph)
	}
}
