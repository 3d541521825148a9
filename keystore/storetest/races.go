package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// runRacesOnExistingKeys races many copies on a key that already has a
// record, in each state from which exactly one new attempt may start:
// the path the shipped workflows take after a destination_failed. A store
// that decides on what it read without checking it is still there when
// it writes (a version or byte comparison) accepts several.
func runRacesOnExistingKeys(t *testing.T, newStore New) {
	const copies, rounds = 50, 8
	reclaim := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{ns: {OnLeaseExpiry: keystore.ExpireReclaim, Lease: 30 * time.Second}}}
	for _, tc := range []struct {
		name   string
		pol    keystore.Policies
		before func(e *env, key string) // leaves key where a new attempt may start
	}{
		{"copies racing after a retryable failure", keystore.Policies{}, func(e *env, key string) {
			r := e.reserve(ns, key)
			wantOutcome(e.t, e.fail(ns, key, r.Token, keystore.ReasonDestinationFailed), keystore.OutcomeDestinationFailed)
		}},
		{"copies racing after a lease ran out with reclaim", reclaim, func(e *env, key string) {
			e.reserve(ns, key)
			e.clock.Advance(31 * time.Second)
		}},
		{"copies racing after a resolve back to retry", keystore.Policies{}, func(e *env, key string) {
			r := e.reserve(ns, key)
			e.fail(ns, key, r.Token, keystore.ReasonOutcomeUnknown)
			if _, err := e.s.Resolve(e.ctx, keystore.ResolveRequest{Namespace: ns, Key: key, Resolution: keystore.StateFailed,
				By: "office manager", Note: "the CRM has no such contact: send it again"}); err != nil {
				e.t.Fatalf("resolve: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t, newStore, tc.pol)
			for round := range rounds {
				key := fmt.Sprintf("evt_race_%d", round)
				tc.before(e, key)
				prev := e.lookup(ns, key).Record.Attempt
				n := e.raceCopies(t, ns, key, copies)
				if n != 1 {
					t.Fatalf("round %d: %d of %d copies accepted, want exactly 1", round, n, copies)
				}
				if got := e.lookup(ns, key).Record.Attempt; got != prev+1 {
					t.Fatalf("round %d: attempt %d after the race, want %d", round, got, prev+1)
				}
			}
		})
	}
}
