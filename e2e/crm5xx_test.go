//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// TestCRMGatewayWroteThen5xx: the CRM sits behind a gateway. The contact is
// created, then the gateway answers 502 or 504 (it lost or gave up on the
// CRM's answer). Such an answer does not prove that nothing was written, so
// the shipped lead workflow must record it as outcome_unknown: the key goes
// unknown, its owner is paged in Slack, the sender is told not to resend,
// and a resend of the same event writes nothing. Recorded as
// destination_failed (retryable), the resend was accepted and the CRM got a
// second contact.
func TestCRMGatewayWroteThen5xx(t *testing.T) {
	s := newSuite(t, guardConfig)
	files, err := s.shippedFiles(s.guard.URL())
	if err != nil {
		t.Fatal(err)
	}
	lead1 := map[string][]byte{}
	for n, b := range files {
		if strings.Contains(n, "lead-to-crm") {
			lead1[n] = b
		}
	}
	s.startN8N(t, nil, lead1, []string{"n8nGuardLeadCrm1"}, []string{leadPath}, false)

	for i, c := range []struct {
		key string
		a   answer
	}{
		{"evt-gw-504", answer504Written},
		{"evt-gw-502", answer502Written},
	} {
		// The owner is paged about this key: in a message of its own, or,
		// when it went unknown inside the group window of an earlier one,
		// in that message updated to count it (which of the two depends on
		// how fast the machine runs the two events).
		grouped := fmt.Sprintf("%d keys of crm-contacts went unknown", i+1)
		t.Run(c.key, func(t *testing.T) {
			s.crm.Plan(c.key, c.a)
			r := s.send(t, leadPath, lead(c.key, "gateway@example.org"))
			if w := s.crm.Writes(c.key); w != 1 {
				t.Fatalf("CRM writes = %d, want the 1 write behind the gateway error", w)
			}
			rec := s.lookup(t, "crm-contacts", c.key)
			// Errorf, not Fatalf: if this is wrong, the resend below shows
			// what it costs.
			if r.Status != 202 || r.Code != "state_unknown" || rec.State != "unknown" || rec.Reason != "outcome_unknown" {
				t.Errorf("after a gateway error the sender got %s and the record is %+v; want 202 state_unknown, unknown, outcome_unknown", r, rec)
			}

			// The sender resends: nothing reaches the CRM again.
			again := s.send(t, leadPath, lead(c.key, "gateway@example.org"))
			if w, req := s.crm.Writes(c.key), s.crm.Requests(c.key); w != 1 || req != 1 {
				t.Fatalf("CRM writes %d in %d requests, want 1 in 1: the resend (answered %s) wrote a second contact", w, req, again)
			}
			expect(t, again, 202, "state_unknown")
			if !testwait.Poll(60*time.Second, func() bool {
				for _, m := range s.slack.Messages() {
					if text := m.Content(); strings.Contains(text, "U0CRMOWNER") && (strings.Contains(text, c.key) || (i > 0 && strings.Contains(text, grouped))) {
						return true
					}
				}
				return false
			}) {
				var got []string
				for _, m := range s.slack.Messages() {
					got = append(got, m.Method+" "+m.Channel+": "+tail(m.Content(), 400))
				}
				t.Fatalf("the owner U0CRMOWNER was not paged about %s (alone or as %q) within 60s; got %d:\n%s", c.key, grouped, len(got), strings.Join(got, "\n"))
			}
		})
	}
}
