package n8n

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// fakeN8n answers the way n8n does (the bodies are a real n8n 1.113.3's
// and 2.41.1's): answers maps "METHOD path" to a status and a body; what
// it does not know is 404 with n8n's message, and a wrong key is 401.
func fakeN8n(t *testing.T, answers map[string]struct {
	status int
	body   string
}) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v1/") && r.Header.Get("X-N8N-API-KEY") != "key" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"message":"unauthorized"}`))
			return
		}
		a, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			a.status, a.body = http.StatusNotFound, `{"message":"not found"}`
		}
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

type answer = struct {
	status int
	body   string
}

func TestBaseURLConvention(t *testing.T) {
	srv := fakeN8n(t, map[string]answer{"GET /api/v1/workflows": {200, `{"data":[],"nextCursor":null}`}})
	for _, base := range []string{srv.URL, srv.URL + "/", srv.URL + "/api/v1", srv.URL + "/api/v1/"} {
		c := New(base, "key", 0)
		if c.Base() != srv.URL {
			t.Errorf("New(%q).Base() = %q, want the instance's address %q", base, c.Base(), srv.URL)
		}
		if err := c.Ping(context.Background()); err != nil {
			t.Errorf("New(%q): %v", base, err)
		}
	}
}

func TestErrorText(t *testing.T) {
	srv := fakeN8n(t, map[string]answer{
		"POST /api/v1/executions/404/retry": {404, `{"message":"The execution with the ID \"404\" does not exist."}`},
		"POST /api/v1/executions/502/retry": {502, `<html><body>Bad Gateway</body></html>`},
		"POST /api/v1/executions/503/retry": {503, ``},
		"POST /api/v1/executions/500/retry": {500, strings.Repeat("x", 400)},
	})
	for _, c := range []struct {
		name, key, exec string
		status          int
		want            []string
	}{
		{"a wrong key says how to get one", "wrong", "1", 401, []string{"HTTP 401 unauthorized", "refused the API key", "Settings → n8n API"}},
		{"n8n's own message, and a hint", "key", "404", 404, []string{"n8n POST /executions/404/retry: HTTP 404", `does not exist.`, "not found (gone"}},
		{"a proxy's HTML page", "key", "502", 502, []string{"HTTP 502 (an HTML page: is this n8n's address?)"}},
		{"no body at all", "key", "503", 503, []string{"HTTP 503 Service Unavailable"}},
		{"a long body is cut", "key", "500", 500, []string{strings.Repeat("x", 300) + "…"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(srv.URL, c.key, 0).RetryExecution(context.Background(), c.exec)
			var ne *Error
			if !errors.As(err, &ne) || ne.StatusCode() != c.status {
				t.Fatalf("err = %v, want an *Error with status %d", err, c.status)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), strings.Repeat("x", 301)) {
				t.Error("the body was not cut")
			}
		})
	}
	t.Run("nobody listening", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		if err := New(dead.URL, "key", 0).Ping(context.Background()); !errors.Is(err, ErrUnreachable) {
			t.Fatalf("err = %v, want ErrUnreachable", err)
		}
	})
}

// Go's client sends custom headers such as the API key along a redirect,
// to any host: the client follows none, and says what to set instead.
func TestClientFollowsNoRedirect(t *testing.T) {
	reached := make(chan http.Header, 10)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- r.Header.Clone()
		w.Write([]byte(`{"data":[],"nextCursor":null}`))
	}))
	t.Cleanup(elsewhere.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusFound)
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "secret-key", 0)
	err := c.Ping(context.Background())
	_, verr := c.Version(context.Background())
	select {
	case h := <-reached:
		t.Errorf("the redirect was followed to another server (API key %q sent along)", h.Get("X-N8N-API-KEY"))
	default:
	}
	var ne *Error
	if !errors.As(err, &ne) || ne.StatusCode() != http.StatusFound {
		t.Fatalf("err = %v, want an *Error with status 302", err)
	}
	for _, w := range []string{"n8n GET /workflows?limit=1: n8n answered 302 redirect to " + elsewhere.URL + "/api/v1/workflows?limit=1", "follows no redirects", "set N8N_API_URL"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if verr == nil || !strings.Contains(verr.Error(), "n8n answered 302 redirect to "+elsewhere.URL+"/rest/settings") {
		t.Errorf("Version: err = %v, want the redirect named", verr)
	}
}

func TestRetryExecution(t *testing.T) {
	srv := fakeN8n(t, map[string]answer{
		// 2.x says the id as a string, some 1.x as a number.
		"POST /api/v1/executions/1/retry": {200, `{"id":"91","mode":"retry","retryOf":"1","status":"running"}`},
		"POST /api/v1/executions/2/retry": {200, `{"id":92,"mode":"retry","status":"running"}`},
		"POST /api/v1/executions/3/retry": {200, `{"mode":"retry"}`},
		"POST /api/v1/executions/4/retry": {200, `not json`},
	})
	c := New(srv.URL, "key", 0)
	for exec, want := range map[string]string{"1": "91", "2": "92", "3": "carries no execution id", "4": "answer is not JSON"} {
		id, err := c.RetryExecution(context.Background(), exec)
		got := id
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, want) {
			t.Errorf("retry %s = %q, want %q", exec, got, want)
		}
	}
}
