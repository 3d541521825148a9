package keystore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A destination limited to namespaces is used by those only: another
// namespace's reserve naming it, or its failure report about a key
// recorded before the limit, is forbidden and changes nothing; its late
// success completes the key but says nothing about the breaker.
func TestADestinationLimitedToNamespacesRefusesTheOthers(t *testing.T) {
	pol := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{
		"shared-pay": {FailureThreshold: 3, UnreachableThreshold: 1, Namespaces: []string{"payments"}}}}
	payments, crm := pol.Namespace("payments"), pol.Namespace("team-crm")
	dp := pol.Destination("shared-pay")

	if _, err := keystore.DecideReserve(nil, keystore.NewBreaker("shared-pay"), keystore.ReserveRequest{Namespace: "team-crm", Key: "evt_1", Destination: "shared-pay"}, nil, crm, now); !forbiddenDestination(err) {
		t.Fatalf("reserve from team-crm: %v, want forbidden, field destination, rule namespaces", err)
	} else if strings.Contains(err.Error(), "payments") {
		t.Errorf("the refusal names the namespaces the destination accepts (another team's): %v", err)
	}
	if _, err := keystore.DecideReserve(nil, keystore.NewBreaker("shared-pay"), keystore.ReserveRequest{Namespace: "payments", Key: "evt_1", Destination: "shared-pay"}, nil, payments, now); err != nil {
		t.Fatalf("reserve from payments: %v", err)
	}

	// team-crm's key, reserved while the destination was not limited.
	legacy := must(t)(keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "team-crm", Key: "evt_1", Destination: "shared-pay"}, nil, keystore.Policies{}.Namespace("team-crm"), t0))
	br := keystore.NewBreaker("shared-pay")
	s, err := keystore.DecideFail(legacy.Record, br, keystore.FailRequest{Namespace: "team-crm", Key: "evt_1", Token: legacy.Result.Token, Reason: keystore.ReasonDestinationUnreachable}, crm, dp, now)
	if !forbiddenDestination(err) || s.Record != nil || s.Breaker != nil || len(s.Events) > 0 {
		t.Fatalf("fail from team-crm: %v, step %+v; want forbidden and nothing to write", err, s)
	}
	half := keystore.NewBreaker("shared-pay")
	half.State, half.ProbeNamespace, half.ProbeKey, half.ProbeUntil = keystore.BreakerHalfOpen, "payments", "probe", ptr(now.Add(time.Minute))
	s = must(t)(keystore.DecideComplete(legacy.Record, half, keystore.CompleteRequest{Namespace: "team-crm", Key: "evt_1", Token: legacy.Result.Token}, crm, now))
	if s.Record == nil || s.Record.State != keystore.StateCompleted || s.Breaker != nil || len(s.Events) > 0 {
		t.Fatalf("complete from team-crm: record %+v, breaker %+v, events %v; want the key completed and the breaker left alone", s.Record, s.Breaker, s.Events)
	}

	// payments' own failure is evidence: with unreachable_threshold 1 it opens.
	own := must(t)(keystore.DecideReserve(nil, nil, keystore.ReserveRequest{Namespace: "payments", Key: "evt_2", Destination: "shared-pay"}, nil, payments, t0))
	s = must(t)(keystore.DecideFail(own.Record, keystore.NewBreaker("shared-pay"), keystore.FailRequest{Namespace: "payments", Key: "evt_2", Token: own.Result.Token, Reason: keystore.ReasonDestinationUnreachable}, payments, dp, now))
	if s.Breaker == nil || s.Breaker.State != keystore.BreakerOpen {
		t.Fatalf("payments' unreachable with unreachable_threshold 1: breaker %+v, want open", s.Breaker)
	}
}

// The unreachable threshold defaults below the failure threshold and
// never above it.
func TestTheUnreachableThresholdDefaultsLowerThanTheFailureThreshold(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		configured            keystore.DestinationPolicy
		failures, unreachable int
	}{
		{"nobody configured it", keystore.DestinationPolicy{}, keystore.DefaultFailureThreshold, keystore.DefaultUnreachableThreshold},
		{"a failure threshold of 1", keystore.DestinationPolicy{FailureThreshold: 1}, 1, 1},
		{"an unreachable threshold above the failure threshold", keystore.DestinationPolicy{FailureThreshold: 3, UnreachableThreshold: 9}, 3, 3},
		{"both set", keystore.DestinationPolicy{FailureThreshold: 10, UnreachableThreshold: 4}, 10, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dp := keystore.Policies{Destinations: map[string]keystore.DestinationPolicy{"crm": tc.configured}}.Destination("crm")
			if dp.FailureThreshold != tc.failures || dp.UnreachableThreshold != tc.unreachable {
				t.Fatalf("thresholds %d/%d, want %d/%d", dp.FailureThreshold, dp.UnreachableThreshold, tc.failures, tc.unreachable)
			}
		})
	}
}

func forbiddenDestination(err error) bool {
	e, ok := err.(*errs.Error)
	return ok && e.Code == errs.Forbidden && len(e.Fields) == 1 && e.Fields[0] == errs.FieldError{Field: "destination", Rule: "namespaces"}
}
