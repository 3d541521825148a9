package api_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/errs"
)

func hasField(fields []errs.FieldError, field, rule string) bool {
	for _, f := range fields {
		if f.Field == field && (rule == "" || f.Rule == rule) {
			return true
		}
	}
	return false
}

// Every error code the contract lists, from the request that causes it.
func TestBadRequests(t *testing.T) {
	e := start(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, tc := range []struct {
		name, path string
		body       any
		code       string
		field      string
		rule       string
	}{
		{"body is not JSON", "/v1/reserve", `namespace=crm&key=1`, "invalid_request", "body", "json"},
		{"body is truncated JSON", "/v1/reserve", `{"namespace": "crm-contacts", "key": "evt_1"`, "invalid_request", "body", ""},
		{"body is empty", "/v1/reserve", ``, "invalid_request", "body", "required"},
		{"body is an array", "/v1/reserve", `[{"namespace":"crm-contacts","key":"evt_1"}]`, "invalid_request", "body", "type=object"},
		{"body is null", "/v1/complete", `null`, "invalid_request", "body", "type=object"},
		{"lease_seconds is a string", "/v1/reserve", `{"namespace":"crm-contacts","key":"evt_1","lease_seconds":"300"}`, "invalid_request", "lease_seconds", "type=integer"},
		{"lease_seconds is a fraction", "/v1/reserve", `{"namespace":"crm-contacts","key":"evt_1","lease_seconds":1.5}`, "invalid_request", "lease_seconds", "type=integer"},
		{"key is an object", "/v1/reserve", `{"namespace":"crm-contacts","key":{"id":1}}`, "invalid_key", "key", "type=string"},
		{"key missing", "/v1/reserve", obj{"namespace": ns}, "invalid_key", "key", "required"},
		{"key only white space", "/v1/reserve", obj{"namespace": ns, "key": "  \t "}, "invalid_key", "key", "required"},
		{"key too long", "/v1/reserve", obj{"namespace": ns, "key": long(256)}, "invalid_key", "key", "max=255"},
		{"key with control character", "/v1/reserve", obj{"namespace": ns, "key": "evt\x001"}, "invalid_key", "key", "no_control"},
		{"key shaped like an e-mail", "/v1/reserve", obj{"namespace": ns, "key": "anna.schmidt@example.com"}, "invalid_key", "key", "no_email"},
		{"body (key) invalid UTF-8", "/v1/reserve", "{\"namespace\":\"crm-contacts\",\"key\":\"evt_\xff\"}", "invalid_request", "body", "utf8"},
		{"namespace missing", "/v1/reserve", obj{"key": "evt_1"}, "invalid_request", "namespace", "namespace"},
		{"namespace upper case", "/v1/reserve", obj{"namespace": "CRM", "key": "evt_1"}, "invalid_request", "namespace", "namespace"},
		{"namespace too long", "/v1/reserve", obj{"namespace": long(65), "key": "evt_1"}, "invalid_request", "namespace", "namespace"},
		{"owner too long", "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "owner": long(129)}, "invalid_request", "owner", "max=128"},
		{"lease 0", "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "lease_seconds": 0}, "invalid_request", "lease_seconds", "min=1"},
		{"lease over a day", "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "lease_seconds": 86401}, "invalid_request", "lease_seconds", "max=86400"},
		{"fingerprint too long", "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "fingerprint": long(129)}, "invalid_request", "fingerprint", "max=128"},
		{"payload and fingerprint", "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "fingerprint": "abc", "payload": obj{"a": 1}}, "invalid_request", "fingerprint", ""},
		{"destination invalid", "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "destination": "Hub Spot"}, "invalid_request", "destination", "namespace"},
		{"complete without token", "/v1/complete", obj{"namespace": ns, "key": "evt_1"}, "invalid_request", "token", "required"},
		{"complete, result not an object", "/v1/complete", obj{"namespace": ns, "key": "evt_1", "token": "1.a", "result": []int{1}}, "invalid_request", "result", ""},
		{"complete, result over 16 KiB", "/v1/complete", obj{"namespace": ns, "key": "evt_1", "token": "1.a", "result": obj{"x": long(17 << 10)}}, "invalid_request", "result", ""},
		{"complete, result_ref too long", "/v1/complete", obj{"namespace": ns, "key": "evt_1", "token": "1.a", "result_ref": long(513)}, "invalid_request", "result_ref", "max=512"},
		{"complete, via unknown", "/v1/complete", obj{"namespace": ns, "key": "evt_1", "token": "1.a", "via": "tertiary"}, "invalid_request", "via", "oneof=primary fallback"},
		{"fail without reason", "/v1/fail", obj{"namespace": ns, "key": "evt_1", "token": "1.a"}, "invalid_request", "reason", "required"},
		{"fail, unknown reason", "/v1/fail", obj{"namespace": ns, "key": "evt_1", "token": "1.a", "reason": "oops"}, "invalid_request", "reason", ""},
		{"fail, message too long", "/v1/fail", obj{"namespace": ns, "key": "evt_1", "token": "1.a", "reason": "destination_failed", "message": long(2001)}, "invalid_request", "message", "max=2000"},
		{"fail, retryable a string", "/v1/fail", `{"namespace":"crm-contacts","key":"evt_1","token":"1.a","reason":"destination_failed","retryable":"yes"}`, "invalid_request", "retryable", "type=boolean"},
		{"resolve, resolution unknown", "/v1/resolve", obj{"namespace": ns, "key": "evt_1", "resolution": "maybe", "by": "a", "note": "b"}, "invalid_request", "resolution", ""},
		{"resolve, note blank", "/v1/resolve", obj{"namespace": ns, "key": "evt_1", "resolution": "completed", "by": "a", "note": "   "}, "invalid_request", "note", ""},
		{"n8n error without execution or trigger", "/v1/n8n/error", obj{"workflow": obj{"id": "1"}}, "invalid_request", "execution", ""},
		{"n8n error not JSON", "/v1/n8n/error", `<html>`, "invalid_request", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := wantProblem(t, e.post(t, tc.path, tc.body), http.StatusBadRequest, tc.code)
			if tc.field != "" && !hasField(p.Fields, tc.field, tc.rule) {
				t.Fatalf("fields = %+v, want %s (%s)", p.Fields, tc.field, tc.rule)
			}
		})
	}
}

func TestAuthOnEveryV1Route(t *testing.T) {
	e := start(t)
	var routes []api.Route
	for _, r := range e.srv.Routes() {
		if strings.HasPrefix(r.Path, "/v1/") {
			routes = append(routes, r)
		}
	}
	if len(routes) != 18 {
		t.Fatalf("%d /v1 routes: %v", len(routes), routes)
	}
	for _, r := range routes {
		for name, headers := range map[string]map[string]string{
			"no token":         nil,
			"wrong token":      {"Authorization": "Bearer " + testToken + "x"},
			"empty bearer":     {"Authorization": "Bearer "},
			"basic auth":       {"Authorization": "Basic dGVzdDp0ZXN0"},
			"token, no scheme": {"Authorization": testToken},
		} {
			t.Run(r.Method+" "+r.Path+" "+name, func(t *testing.T) {
				res := e.callWith(t, r.Method, r.Path, `{}`, headers)
				wantProblem(t, res, http.StatusUnauthorized, "unauthorized")
				if !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("WWW-Authenticate = %q", res.Header.Get("WWW-Authenticate"))
				}
			})
		}
	}
	t.Run("second configured token and lower-case scheme are accepted", func(t *testing.T) {
		res := e.callWith(t, http.MethodGet, "/v1/destinations", nil, map[string]string{"Authorization": "bearer second-token"})
		if res.Status != http.StatusOK {
			t.Fatalf("%s", res)
		}
	})
	t.Run("healthz, readyz and metrics need no token", func(t *testing.T) {
		for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
			if res := e.callWith(t, http.MethodGet, p, nil, nil); res.Status != http.StatusOK {
				t.Fatalf("%s", res)
			}
		}
	})
}

func TestPayloadTooLarge(t *testing.T) {
	t.Run("default limit 64 KiB", func(t *testing.T) {
		e := start(t)
		big := `{"namespace":"crm-contacts","key":"evt_1","payload":"` + strings.Repeat("x", 64<<10) + `"}`
		// Every time: the body is read and the 413 arrives, never a reset
		// of a connection closed with the body unread.
		for range 30 {
			wantProblem(t, e.post(t, "/v1/reserve", big), http.StatusRequestEntityTooLarge, "payload_too_large")
		}
		// Just under the limit is read (and judged on its merits).
		fits := `{"namespace":"crm-contacts","key":"evt_1","payload":"` + strings.Repeat("x", 60<<10) + `"}`
		wantOK(t, e.post(t, "/v1/reserve", fits), "accepted")
		wantProblem(t, e.post(t, "/v1/n8n/error", `{"execution":{"error":{"message":"`+strings.Repeat("x", 70<<10)+`"}}}`), http.StatusRequestEntityTooLarge, "payload_too_large")
	})
	t.Run("configured limit", func(t *testing.T) {
		e := start(t, withBodyLimit(1024))
		wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1", "payload": strings.Repeat("y", 2000)}), http.StatusRequestEntityTooLarge, "payload_too_large")
	})
}

func TestUnknownRoute(t *testing.T) {
	e := start(t)
	// Never not_found, which says a key is absent.
	wantProblem(t, e.get(t, "/v2/reserve"), http.StatusNotFound, "route_not_found")
	wantProblem(t, e.get(t, "/v1/reserve"), http.StatusNotFound, "route_not_found")
}

func TestStoreUnavailable(t *testing.T) {
	e := start(t)
	tok := e.accepted(t, "evt_1")
	if err := e.store.Close(); err != nil {
		t.Fatal(err)
	}
	p := wantProblem(t, e.post(t, "/v1/complete", obj{"namespace": ns, "key": "evt_1", "token": tok}), http.StatusServiceUnavailable, "store_unavailable")
	if strings.Contains(p.Detail, "bolt") || strings.Contains(p.Detail, "/") {
		t.Fatalf("detail leaks internals: %q", p.Detail)
	}
	wantProblem(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_2"}), http.StatusServiceUnavailable, "store_unavailable")
	wantProblem(t, e.get(t, "/v1/lookup?namespace="+ns+"&key=evt_1"), http.StatusServiceUnavailable, "store_unavailable")
	wantProblem(t, e.callWith(t, http.MethodGet, "/readyz", nil, nil), http.StatusServiceUnavailable, "store_unavailable")
	if h := e.callWith(t, http.MethodGet, "/healthz", nil, nil); h.Status != http.StatusOK {
		t.Fatalf("healthz must stay up: %s", h)
	}
}

func TestN8nError(t *testing.T) {
	e := start(t)
	fixtures, _ := filepath.Glob("/work/shared/n8n/fixtures/*.json")
	fixtures = append(fixtures, "") // plus an inline item, when the fixtures are not around
	for _, f := range fixtures {
		body := []byte(`{"execution":{"id":"231","lastNodeExecuted":"Create contact","error":{"message":"Bad gateway"}},"workflow":{"id":"7","name":"orders-to-crm"}}`)
		if f != "" {
			var err error
			if body, err = os.ReadFile(f); err != nil {
				t.Fatal(err)
			}
		}
		r := e.post(t, "/v1/n8n/error", body)
		if r.Status != http.StatusAccepted {
			t.Fatalf("%s: %s", f, r)
		}
		a := r.JSON(t)
		if a["accepted"] != true || a["notification_id"] == "" || a["owner"] != "U0ONCALL" {
			t.Fatalf("%s: %v", f, a)
		}
		if s := a["status"]; s != "queued" && s != "grouped" {
			t.Fatalf("status %v", s)
		}
	}
	page := e.get(t, "/v1/notifications?status=pending&limit=10").JSON(t)
	if items := page["items"].([]any); len(items) == 0 {
		t.Fatalf("outbox: %v", page)
	}
	wantProblem(t, e.get(t, "/v1/notifications?status=lost"), 400, "invalid_request")
}

func TestHealthAndMetrics(t *testing.T) {
	e := start(t)
	h := e.callWith(t, http.MethodGet, "/healthz", nil, nil).JSON(t)
	if h["status"] != "ok" || h["version"] != "test" {
		t.Fatalf("healthz: %v", h)
	}
	tok := e.accepted(t, "evt_1", obj{"destination": "hubspot"})
	wantOK(t, e.post(t, "/v1/reserve", obj{"namespace": ns, "key": "evt_1"}), "in_progress")
	wantOK(t, e.post(t, "/v1/fail", obj{"namespace": ns, "key": "evt_1", "token": tok, "reason": "outcome_unknown"}), "state_unknown")
	e.get(t, "/v1/keys?limit=bad")
	m := e.callWith(t, http.MethodGet, "/metrics", nil, nil)
	if !strings.HasPrefix(m.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("metrics content type %q", m.Header.Get("Content-Type"))
	}
	for _, want := range []string{
		`n8n_guard_http_requests_total{method="POST",route="/v1/reserve",status="200"} 2`,
		`n8n_guard_http_requests_total{method="GET",route="/v1/keys",status="400"} 1`,
		`n8n_guard_http_request_duration_seconds_bucket{method="POST",route="/v1/reserve",le="+Inf"} 2`,
		`n8n_guard_reserve_outcomes_total{namespace="crm-contacts",outcome="accepted"} 1`,
		`n8n_guard_reserve_outcomes_total{namespace="crm-contacts",outcome="in_progress"} 1`,
		`n8n_guard_keys{namespace="crm-contacts",state="unknown"} 1`,
		`n8n_guard_stuck_reservations{namespace="crm-contacts"} 1`,
		`n8n_guard_destination_breaker_state{destination="hubspot",state="closed"} 1`,
		`n8n_guard_destination_breaker_state{destination="hubspot",state="open"} 0`,
		`n8n_guard_store_up 1`,
	} {
		if !strings.Contains(string(m.Body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", m.Body)
	}
}

// A request in flight when shutdown begins is answered; then the server
// stops.
func TestShutdownDrainsInFlight(t *testing.T) {
	e := start(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"namespace":"crm-contacts","key":"evt_inflight"}`
	head := "POST /v1/reserve HTTP/1.1\r\nHost: guard\r\nAuthorization: Bearer " + testToken +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head+body[:10]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the server is now reading the body
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done <- e.srv.Shutdown(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := io.WriteString(conn, body[10:]); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("in-flight request not answered: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"outcome":"accepted"`) {
		t.Fatalf("in-flight request: %d %s", res.StatusCode, b)
	}
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if _, err := net.DialTimeout("tcp", strings.TrimPrefix(e.url, "http://"), time.Second); err == nil {
		t.Fatalf("still accepting connections after shutdown")
	}
}
