package console

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// "Probing" is said only while a probe is in flight: a half-open breaker
// whose probe was lost, lapsed or not taken yet tests nothing, and an
// outage of 20 minutes with no probe out must not read "probing".
func TestProbingIsSaidOnlyWhileAProbeIsInFlight(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Second)
	dp := keystore.DestinationPolicy{CatchUpRate: 5, CatchUpConcurrency: 4}
	for _, tc := range []struct {
		name    string
		b       keystore.Breaker
		probing bool
	}{
		{"a probe out", keystore.Breaker{State: keystore.BreakerHalfOpen, ProbeNamespace: "crm-contacts", ProbeKey: "evt_1", ProbeUntil: &later}, true},
		{"a namespace's probe out", keystore.Breaker{State: keystore.BreakerHalfOpen, Views: []keystore.BreakerView{{Namespace: "crm-contacts", State: keystore.BreakerOpen, ProbeKey: "evt_1", ProbeUntil: &later}}}, true},
		{"the probe was lost (given up)", keystore.Breaker{State: keystore.BreakerHalfOpen}, false},
		{"the probe's hold ran out", keystore.Breaker{State: keystore.BreakerHalfOpen, ProbeNamespace: "crm-contacts", ProbeKey: "evt_1", ProbeUntil: &earlier}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			words, catchUp := keystore.BreakerWords(tc.b, now), catchUpText(tc.b, 3, dp, now)
			for _, got := range []string{words, catchUp} {
				if strings.Contains(got, "probing") != tc.probing {
					t.Errorf("%q: says probing %v, want %v", got, !tc.probing, tc.probing)
				}
			}
		})
	}
}
