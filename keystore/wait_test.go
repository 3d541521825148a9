package keystore_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The overdue keys are read per parked_limit: a namespace with a limit of
// its own on its own, every other one in one read at the default, so
// that no read reaches a key within its namespace's limit.
func TestOverdueReadsOnePerLimit(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{
		"fast": {ParkedLimit: 8 * time.Minute}, "same": {ParkedLimit: keystore.DefaultParkedLimit}, "slow": {ParkedLimit: 100 * time.Hour}, "plain": {}}}
	q := keystore.WaitQuery{Destination: "hubspot", Stages: keystore.QueuedStages}
	want := []keystore.WaitQuery{
		{Destination: "hubspot", Namespace: "fast", Stages: keystore.QueuedStages, Until: now.Add(-8 * time.Minute)},
		{Destination: "hubspot", Namespace: "slow", Stages: keystore.QueuedStages, Until: now.Add(-100 * time.Hour)},
		{Destination: "hubspot", Except: []string{"fast", "slow"}, Stages: keystore.QueuedStages, Until: now.Add(-keystore.DefaultParkedLimit)},
	}
	if got := pol.OverdueReads(q, now); !reflect.DeepEqual(got, want) {
		t.Fatalf("every namespace:\n got %+v\nwant %+v", got, want)
	}
	q.Namespace = "fast"
	if got := pol.OverdueReads(q, now); len(got) != 1 || got[0].Namespace != "fast" || !got[0].Until.Equal(now.Add(-8*time.Minute)) {
		t.Fatalf("one namespace: %+v", got)
	}
}
