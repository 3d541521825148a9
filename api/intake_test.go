package api_test

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
)

// One reserve token floods the failure intake with made-up failures (2,000
// once gave 671 Slack messages): past its limit a minute each is answered
// 429 rate_limited with Retry-After, nothing is recorded, and the refusal
// is counted by token. Another token's failures still get through; the
// flooding token gets through again once its bucket refills. The limiter
// runs on the test's clock, not the wall's.
func TestFailureIntakeIsLimitedPerToken(t *testing.T) {
	clock := fakeclock.New()
	const perMinute = 6 // one every 10 s, in bursts of 6
	tokens := map[string]string{"team-crm": "crm-token-value", "team-pay": "pay-token-value"}
	var ts []api.TokenScope
	for name, v := range tokens {
		ts = append(ts, api.TokenScope{Name: name, SHA256: sha256.Sum256([]byte(v)), Role: access.RoleReserve, Namespaces: []string{ns}})
	}
	e := start(t, withAPI(api.Config{ScopedTokens: ts, Clock: clock.Now, Limits: api.Limits{IntakePerMinute: perMinute}}))
	report := func(name string, i int) *resp {
		return e.callWith(t, http.MethodPost, "/v1/n8n/error", obj{
			"execution": obj{"id": fmt.Sprint(i), "error": obj{"message": "made up"}}, "workflow": obj{"id": fmt.Sprint("wf", i), "name": fmt.Sprint("payments ", i)},
		}, map[string]string{"Authorization": "Bearer " + tokens[name]})
	}
	accepted := 0
	for i := range perMinute {
		if r := report("team-crm", i); r.Status != http.StatusAccepted {
			t.Fatalf("failure %d within the limit: %s", i, r)
		}
		accepted++
	}
	const flood = 50
	for i := range flood {
		r := report("team-crm", perMinute+i)
		p := wantProblem(t, r, http.StatusTooManyRequests, "rate_limited")
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 10 {
			t.Fatalf("Retry-After %q, want 1..10 s (%s)", r.Header.Get("Retry-After"), p.Detail)
		}
	}
	// Another token is not charged for the first one's flood.
	for i := range perMinute {
		if r := report("team-pay", 1000+i); r.Status != http.StatusAccepted {
			t.Fatalf("the other token's failure %d: %s", i, r)
		}
		accepted++
	}
	// The refusals are counted by token, the flooding one's only.
	m := string(e.get(t, "/metrics").Body)
	if got := intakeMetric(t, m, `n8n_guard_intake_refusals_total{token="team-crm"}`); got != flood {
		t.Errorf("refusals of team-crm counted %v, want %d", got, flood)
	}
	if regexp.MustCompile(`n8n_guard_intake_refusals_total\{token="team-pay"\} [1-9]`).MatchString(m) {
		t.Errorf("team-pay's refusals counted: %s", m)
	}
	// Nothing of a refused failure was recorded.
	list := e.get(t, "/v1/notifications?limit=500")
	if list.Status != http.StatusOK {
		t.Fatalf("notifications: %s", list)
	}
	page := list.JSON(t)
	if n := len(page["items"].([]any)); n != accepted {
		t.Errorf("%d notifications recorded, want the %d accepted", n, accepted)
	}
	// The bucket refills on the clock: one more after 10 s, not two.
	clock.Advance(10 * time.Second)
	if r := report("team-crm", 9000); r.Status != http.StatusAccepted {
		t.Fatalf("after 10 s: %s", r)
	}
	wantProblem(t, report("team-crm", 9001), http.StatusTooManyRequests, "rate_limited")
}

// metricValue is the value of one series in a /metrics text.
func intakeMetric(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(series) + ` (\S+)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no series %s", series)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
