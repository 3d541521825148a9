package n8n

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestN8NVersionSupport(t *testing.T) {
	for _, c := range []struct {
		name string
		v    Version
		ok   bool
	}{
		{"1.113.3, proven", Version{1, 113, 3, true, FromSettings}, true},
		{"a later 1.x", Version{1, 123, 0, true, FromSettings}, true},
		{"2.41.1, proven", Version{2, 41, 1, true, FromMetrics}, true},
		{"2.x or later, inferred", Version{Major: 2, From: FromInferred}, true},
		{"3.4.4, on n8n's documented changes", Version{3, 4, 4, true, FromMetrics}, true},
		{"3.x given", Version{Major: 3, From: FromGiven}, true},
		{"1.112, before the public API setup needs", Version{1, 112, 9, true, FromSettings}, false},
		{"0.236", Version{0, 236, 0, true, FromSettings}, false},
		{"4.0, never checked", Version{4, 0, 0, true, FromMetrics}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.v.Supported()
			if (err == nil) != c.ok {
				t.Fatalf("supported(%s) = %v, want ok=%v", c.v, err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "not supported") {
				t.Fatalf("error %q does not say the version is not supported", err)
			}
		})
	}
}

// The line the commands print says the version, where it was read, and
// for 3.x that it is checked against n8n's documented changes and not run
// here; an inferred major says that it was inferred.
func TestVersionDescribe(t *testing.T) {
	for _, c := range []struct {
		name    string
		v       Version
		want    []string
		mustNot []string
	}{
		{"2.41.1 from the metrics", Version{2, 41, 1, true, FromMetrics}, []string{"n8n 2.41.1 at http://n8n:5678 (", "/metrics"}, []string{"not run here", "inferred", "note:"}},
		{"3.4.4 from the metrics", Version{3, 4, 4, true, FromMetrics}, []string{"n8n 3.4.4 at http://n8n:5678 (", "/metrics", "\n  note: n8n 3.x is checked against n8n's documented 3.0 changes", "not run here", "2.41.1", "1.113.3"}, nil},
		{"3.x given", Version{Major: 3, From: FromGiven}, []string{"n8n 3.x at http://n8n:5678 (as given by --n8n-version)", "not run here"}, []string{"or later"}},
		{"inferred", Version{Major: 2, From: FromInferred}, []string{"n8n 2.x or later at http://n8n:5678 (inferred", "--n8n-version", "not run here"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.v.Describe("http://n8n:5678")
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q does not say %q", got, w)
				}
			}
			for _, w := range c.mustNot {
				if strings.Contains(got, w) {
					t.Errorf("%q says %q", got, w)
				}
			}
		})
	}
}

// n8n tells its version in its login-free settings (1.x) or at /metrics
// (N8N_METRICS=true, every version); 2.x and 3.x answer public settings
// without it. The version is read where n8n says it, and inferred (and
// said so) only where it says it nowhere.
func TestReadVersion(t *testing.T) {
	const public = `{"data":{"settingsMode":"public","communityNodesEnabled":true}}`
	const metrics3 = "# HELP n8n_nodejs_version_info Node.js version info.\n" +
		"n8n_nodejs_version_info{version=\"v22.19.0\",major=\"22\",minor=\"19\",patch=\"0\"} 1\n" +
		"# HELP n8n_version_info n8n version info.\n# TYPE n8n_version_info gauge\n" +
		"n8n_version_info{version=\"v3.4.4\",major=\"3\",minor=\"4\",patch=\"4\"} 1\n"
	for _, c := range []struct {
		name            string
		settings        string
		metrics         *answer
		given           string
		want, wantFrom  string
		wantErr         string
		wantMetricsRead bool
	}{
		{name: "1.x says it in its settings", settings: `{"data":{"versionCli":"1.113.3","settingsMode":"all"}}`, want: "1.113.3", wantFrom: FromSettings},
		{name: "3.x says it at /metrics", settings: public, metrics: &answer{200, metrics3}, want: "3.4.4", wantFrom: FromMetrics, wantMetricsRead: true},
		{name: "a custom metrics prefix", settings: public, metrics: &answer{200, "acme_version_info{version=\"v2.41.1\"} 1\n"}, want: "2.41.1", wantFrom: FromMetrics, wantMetricsRead: true},
		{name: "metrics off: inferred and said so", settings: public, want: "2.x or later", wantFrom: FromInferred, wantMetricsRead: true},
		{name: "metrics without n8n's version", settings: public, metrics: &answer{200, "n8n_nodejs_version_info{version=\"v22.19.0\"} 1\n"}, want: "2.x or later", wantFrom: FromInferred, wantMetricsRead: true},
		{name: "metrics behind a login page", settings: public, metrics: &answer{200, "<html>sign in</html>"}, want: "2.x or later", wantFrom: FromInferred, wantMetricsRead: true},
		{name: "the operator says 3.4.4", settings: public, given: "3.4.4", want: "3.4.4", wantFrom: FromGiven, wantMetricsRead: true},
		{name: "the operator says 3.x", settings: public, given: "3.x", want: "3.x", wantFrom: FromGiven, wantMetricsRead: true},
		{name: "the operator contradicts n8n", settings: public, metrics: &answer{200, metrics3}, given: "2.41.1", wantErr: "n8n says it is 3.4.4", wantMetricsRead: true},
		{name: "the operator says 1.x of a 2.x-style n8n", settings: public, given: "1.113.3", wantErr: "answers as n8n 2.x or later", wantMetricsRead: true},
		{name: "a 4.x is refused", settings: public, metrics: &answer{200, "n8n_version_info{version=\"v4.0.1\"} 1\n"}, wantErr: "not supported", wantMetricsRead: true},
		{name: "an unreadable version", settings: `{"data":{"versionCli":"next"}}`, wantErr: "cannot read"},
		{name: "not n8n", settings: `<html></html>`, wantErr: "without n8n's settings"},
		{name: "an n8n before public settings", settings: `{"data":{}}`, wantErr: "did not say its version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var metricsRead atomic.Bool
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/rest/settings":
					w.Write([]byte(c.settings))
				case "/metrics":
					metricsRead.Store(true)
					if c.metrics == nil {
						http.NotFound(w, r)
						return
					}
					w.WriteHeader(c.metrics.status)
					w.Write([]byte(c.metrics.body))
				case "/api/v1/workflows":
					if r.Header.Get("X-N8N-API-KEY") != "key" {
						w.WriteHeader(http.StatusUnauthorized)
						return
					}
					w.Write([]byte(`{"data":[],"nextCursor":null}`))
				default:
					http.NotFound(w, r)
				}
			}))
			t.Cleanup(srv.Close)
			inst, err := Connect(context.Background(), New(srv.URL, "key", 0), c.given)
			if metricsRead.Load() != c.wantMetricsRead {
				t.Errorf("/metrics read = %v, want %v", metricsRead.Load(), c.wantMetricsRead)
			}
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := inst.Version.String(); got != c.want || inst.Version.From != c.wantFrom {
				t.Fatalf("version = %q from %q, want %q from %q", got, inst.Version.From, c.want, c.wantFrom)
			}
		})
	}
}
