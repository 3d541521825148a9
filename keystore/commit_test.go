package keystore_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A keyed subscriber is woken by the commits of the keys it matches and
// by commits that do not say their keys, and hears which; a plain
// subscriber (Commits) is woken by every commit as before.
func TestKeyedCommits(t *testing.T) {
	var sig keystore.CommitSignal
	plain, stopPlain := sig.Subscribe()
	defer stopPlain()
	crm := sig.SubscribeKeys(func(k keystore.CommittedKey) bool { return k.Namespace == "crm" })
	defer crm.Stop()
	hubspot := sig.SubscribeKeys(func(k keystore.CommittedKey) bool { return k.Destination == "hubspot" })
	defer hubspot.Stop()
	woken := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}

	// A fresh subscription is past its cooldown: a wake is sent at once.
	sig.Notify(keystore.CommittedKey{Namespace: "mail", Key: "evt_1", Destination: "smtp"})
	if !woken(plain) || woken(crm.C) || woken(hubspot.C) {
		t.Fatal("a key of another namespace and destination woke a keyed subscriber, or the plain one was not woken")
	}
	if keys, all := crm.Take(); keys != nil || all {
		t.Fatalf("crm holds %v %v after another namespace's commit", keys, all)
	}

	sig.Notify(keystore.CommittedKey{Namespace: "mail", Key: "evt_2"}, keystore.CommittedKey{Namespace: "crm", Key: "evt_3", Destination: "hubspot"})
	if !woken(crm.C) {
		t.Fatal("a crm key's commit did not wake the crm subscriber")
	}
	if keys, all := crm.Take(); all || !slices.Equal(keys, []keystore.CommittedKey{{Namespace: "crm", Key: "evt_3", Destination: "hubspot"}}) {
		t.Fatalf("crm took %v %v", keys, all)
	}
	if keys, all := hubspot.Take(); all || len(keys) != 1 || keys[0].Key != "evt_3" {
		t.Fatalf("hubspot took %v %v", keys, all)
	}

	sig.Notify() // a commit that does not say its keys
	if keys, all := crm.Take(); !all || keys != nil {
		t.Fatalf("after an unsaid commit crm took %v %v, want all", keys, all)
	}

	// A subscriber that does not take its keys holds a bounded number,
	// then hears all.
	for i := range 2000 {
		sig.Notify(keystore.CommittedKey{Namespace: "crm", Key: fmt.Sprintf("evt_%d", i)})
	}
	if keys, all := crm.Take(); !all || keys != nil {
		t.Fatalf("after 2000 untaken keys crm took %d keys, all %v", len(keys), all)
	}
	crm.Stop()
	sig.Notify(keystore.CommittedKey{Namespace: "crm", Key: "evt_x"})
	if keys, _ := crm.Take(); keys != nil {
		t.Fatalf("a stopped subscription holds %v", keys)
	}
}

// What a step says it committed: its record's key and destination, and a
// breaker of another destination (or alone) by its destination.
func TestStepCommitted(t *testing.T) {
	rec := &keystore.Record{Namespace: "crm", Key: "evt_1", Destination: "hubspot"}
	granted := &keystore.Record{Namespace: "crm", Key: "evt_2", State: keystore.StateFailed, Retryable: true, Stage: keystore.StageAtGate,
		History: []keystore.Transition{{Event: keystore.HistoryRerunGate}, {Event: keystore.HistoryRerunGranted}}}
	for _, c := range []struct {
		name string
		st   keystore.Step
		want []keystore.CommittedKey
	}{
		{"a record", keystore.Step{Record: rec}, []keystore.CommittedKey{{Namespace: "crm", Key: "evt_1", Destination: "hubspot"}}},
		{"a record and its breaker", keystore.Step{Record: rec, Breaker: keystore.NewBreaker("hubspot")}, []keystore.CommittedKey{{Namespace: "crm", Key: "evt_1", Destination: "hubspot"}}},
		{"a breaker alone", keystore.Step{Breaker: keystore.NewBreaker("erp")}, []keystore.CommittedKey{{Destination: "erp"}}},
		{"a record and its breaker closed by it", keystore.Step{Record: rec, Breaker: keystore.NewBreaker("hubspot"), Events: []keystore.Event{{Kind: keystore.EventBreakerClosed, Destination: "hubspot"}}},
			[]keystore.CommittedKey{{Namespace: "crm", Key: "evt_1", Destination: "hubspot"}, {Destination: "hubspot"}}},
		{"a record's stage as the store writes it, not as it was loaded", keystore.Step{Record: granted},
			[]keystore.CommittedKey{{Namespace: "crm", Key: "evt_2", Stage: keystore.StageGranted}}},
		{"events alone", keystore.Step{Events: []keystore.Event{{Kind: keystore.EventKeyUnknown}}}, nil},
	} {
		if got := c.st.Committed(); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
