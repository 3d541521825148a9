package n8nsetup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/n8n-guard/n8n-guard/n8n"
)

// answer is what a fake n8n sends: a status and a body.
type answer = struct {
	status int
	body   string
}

func TestN8NVersionSupport(t *testing.T) {
	for _, c := range []struct {
		name string
		v    n8n.Version
		ok   bool
	}{
		{"1.113.3, proven", n8n.Version{Major: 1, Minor: 113, Patch: 3, Exact: true, From: n8n.FromSettings}, true},
		{"a later 1.x", n8n.Version{Major: 1, Minor: 123, Patch: 0, Exact: true, From: n8n.FromSettings}, true},
		{"2.41.1, proven", n8n.Version{Major: 2, Minor: 41, Patch: 1, Exact: true, From: n8n.FromMetrics}, true},
		{"2.x or later, inferred", n8n.Version{Major: 2, From: n8n.FromInferred}, true},
		{"3.4.4, on n8n's documented changes", n8n.Version{Major: 3, Minor: 4, Patch: 4, Exact: true, From: n8n.FromMetrics}, true},
		{"3.x given", n8n.Version{Major: 3, From: n8n.FromGiven}, true},
		{"1.112, before the public API setup needs", n8n.Version{Major: 1, Minor: 112, Patch: 9, Exact: true, From: n8n.FromSettings}, false},
		{"0.236", n8n.Version{Major: 0, Minor: 236, Patch: 0, Exact: true, From: n8n.FromSettings}, false},
		{"4.0, never checked", n8n.Version{Major: 4, Minor: 0, Patch: 0, Exact: true, From: n8n.FromMetrics}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := supported(c.v)
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
		v       n8n.Version
		want    []string
		mustNot []string
	}{
		{"2.41.1 from the metrics", n8n.Version{Major: 2, Minor: 41, Patch: 1, Exact: true, From: n8n.FromMetrics}, []string{"n8n 2.41.1 at http://n8n:5678 (", "/metrics"}, []string{"not run here", "inferred", "note:"}},
		{"3.4.4 from the metrics", n8n.Version{Major: 3, Minor: 4, Patch: 4, Exact: true, From: n8n.FromMetrics}, []string{"n8n 3.4.4 at http://n8n:5678 (", "/metrics", "\n  note: n8n 3.x is checked against n8n's documented 3.0 changes", "not run here", "2.41.1", "1.113.3"}, nil},
		{"3.x given", n8n.Version{Major: 3, From: n8n.FromGiven}, []string{"n8n 3.x at http://n8n:5678 (as given by --n8n-version)", "not run here"}, []string{"or later"}},
		{"inferred", n8n.Version{Major: 2, From: n8n.FromInferred}, []string{"n8n 2.x or later at http://n8n:5678 (inferred", "--n8n-version", "not run here"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Describe(c.v, "http://n8n:5678")
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
		{name: "1.x says it in its settings", settings: `{"data":{"versionCli":"1.113.3","settingsMode":"all"}}`, want: "1.113.3", wantFrom: n8n.FromSettings},
		{name: "3.x says it at /metrics", settings: public, metrics: &answer{200, metrics3}, want: "3.4.4", wantFrom: n8n.FromMetrics, wantMetricsRead: true},
		{name: "a custom metrics prefix", settings: public, metrics: &answer{200, "acme_version_info{version=\"v2.41.1\"} 1\n"}, want: "2.41.1", wantFrom: n8n.FromMetrics, wantMetricsRead: true},
		{name: "metrics off: inferred and said so", settings: public, want: "2.x or later", wantFrom: n8n.FromInferred, wantMetricsRead: true},
		{name: "metrics without n8n's version", settings: public, metrics: &answer{200, "n8n_nodejs_version_info{version=\"v22.19.0\"} 1\n"}, want: "2.x or later", wantFrom: n8n.FromInferred, wantMetricsRead: true},
		{name: "metrics behind a login page", settings: public, metrics: &answer{200, "<html>sign in</html>"}, want: "2.x or later", wantFrom: n8n.FromInferred, wantMetricsRead: true},
		{name: "the operator says 3.4.4", settings: public, given: "3.4.4", want: "3.4.4", wantFrom: n8n.FromGiven, wantMetricsRead: true},
		{name: "the operator says 3.x", settings: public, given: "3.x", want: "3.x", wantFrom: n8n.FromGiven, wantMetricsRead: true},
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
			inst, err := Connect(context.Background(), n8n.New(srv.URL, "key", 0), c.given)
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
