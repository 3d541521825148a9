package n8n_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// n8n's answers to a resume call, as waiting-webhooks.ts gives them, and
// what the guard makes of each.
func TestResumeAnswers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   keystore.ResumeAnswer
	}{
		{"woken", 200, `{"message":"Workflow was started"}`, keystore.ResumeAccepted},
		{"deleted or pruned", 404, `{"code":404,"message":"The execution \"12\" does not exist."}`, keystore.ResumeLost},
		{"not at its Wait node yet", 409, `{"code":409,"message":"The execution \"12\" is running already."}`, keystore.ResumeRetry},
		{"finished meanwhile", 409, `{"code":409,"message":"The execution \"12\" has finished already."}`, keystore.ResumeLost},
		{"n8n restarting", 503, `Service Unavailable`, keystore.ResumeRetry},
		{"wrong credential", 403, `{"code":403,"message":"Authorization data is wrong!"}`, keystore.ResumeRetry},
		// Seen on 2.41.1: an execution that started before n8n setup wired
		// the Wait node's credential can never be woken by the guard.
		{"Wait node without its credential", 500, `No authentication data defined on node!`, keystore.ResumeLost},
		{"Wait node without its credential, as JSON", 500, `{"code":500,"message":"No authentication data defined on node!"}`, keystore.ResumeLost},
		{"another 500", 500, `{"code":500,"message":"Internal error"}`, keystore.ResumeRetry},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got http.Header
			var body n8n.ResumeBody
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = r.Header.Clone()
				json.NewDecoder(r.Body).Decode(&body)
				w.WriteHeader(c.status)
				w.Write([]byte(c.body))
			}))
			defer srv.Close()
			rc := &n8n.ResumeCaller{Secret: "s3cret", Targets: targets(t, srv.URL)}
			out := rc.Resume(context.Background(), &keystore.Record{Namespace: "crm-contacts", Key: "evt_1", Attempt: 2, ResumeURL: srv.URL + "/webhook-waiting/12"})
			if out.Answer != c.want || out.Status != c.status || out.Detail == "" {
				t.Fatalf("got %+v, want answer %d", out, c.want)
			}
			if got.Get(n8n.ResumeDefaultHeader) != "s3cret" || body.Key != "evt_1" || body.Attempt != 2 || body.ResumedBy != "n8n-guard" {
				t.Fatalf("request: header %q, body %+v", got.Get(n8n.ResumeDefaultHeader), body)
			}
		})
	}
	t.Run("n8n down (connection refused)", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		out := (&n8n.ResumeCaller{Targets: targets(t, "http://"+addr)}).Resume(context.Background(), &keystore.Record{ResumeURL: "http://" + addr + "/webhook-waiting/1"})
		if out.Answer != keystore.ResumeRetry || out.Status != 0 {
			t.Fatalf("got %+v, want retry", out)
		}
	})
}

// targets are resume targets allowing the n8n at base.
func targets(t *testing.T, base string) keystore.ResumeTargets {
	t.Helper()
	tg, err := keystore.NewResumeTargets([]string{base}, "")
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

// listener is a server that records whether it was called and with which
// resume header.
func listener(t *testing.T, h http.HandlerFunc) (*httptest.Server, *[]string) {
	var seen []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get(n8n.ResumeDefaultHeader))
		mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// A stored resume URL that points anywhere but a configured n8n's
// waiting-webhook path is never called with the secret: a record stored
// before the rule, or written by a tool, cannot send it elsewhere.
func TestResumeCallsOnlyTheConfiguredN8n(t *testing.T) {
	n8nSrv, _ := listener(t, nil)
	foreign, seen := listener(t, nil)
	rc := &n8n.ResumeCaller{Secret: "s3cret", Targets: targets(t, n8nSrv.URL)}
	for what, u := range map[string]string{
		"another origin":          foreign.URL + "/webhook-waiting/12",
		"another path of n8n":     n8nSrv.URL + "/webhook/steal",
		"an encoded climb":        n8nSrv.URL + "/webhook-waiting/%2e%2e/rest/login",
		"no targets configured":   "",
		"user info in the origin": strings.Replace(n8nSrv.URL, "http://", "http://evil@", 1) + "/webhook-waiting/1",
	} {
		c := rc
		if u == "" {
			c, u = &n8n.ResumeCaller{Secret: "s3cret"}, n8nSrv.URL+"/webhook-waiting/12"
		}
		out := c.Resume(context.Background(), &keystore.Record{ResumeURL: u})
		if out.Answer != keystore.ResumeLost || out.Status != 0 || !strings.Contains(out.Detail, "does not call") {
			t.Errorf("%s: %+v, want lost without a call", what, out)
		}
	}
	if len(*seen) != 0 {
		t.Fatalf("the foreign listener was called: %q", *seen)
	}
}

// n8n answering a redirect is not followed: the secret stays with n8n.
func TestResumeFollowsNoRedirect(t *testing.T) {
	elsewhere, seen := listener(t, nil)
	n8nSrv, _ := listener(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/webhook-waiting/12", http.StatusTemporaryRedirect)
	})
	for _, client := range []*http.Client{nil, {}} {
		rc := &n8n.ResumeCaller{Secret: "s3cret", Client: client, Targets: targets(t, n8nSrv.URL)}
		out := rc.Resume(context.Background(), &keystore.Record{ResumeURL: n8nSrv.URL + "/webhook-waiting/12"})
		if out.Answer == keystore.ResumeAccepted || out.Status != http.StatusTemporaryRedirect {
			t.Fatalf("client %v: %+v, want the 307 as the answer", client, out)
		}
	}
	cc := &n8n.CheckCaller{URL: n8nSrv.URL + "/webhook/check", Secret: "check-secret"}
	if out := cc.Call(context.Background(), n8n.CheckRequest{Namespace: "crm-contacts", Key: "evt_1"}); out.Status != http.StatusTemporaryRedirect {
		t.Fatalf("check: %+v, want the 307 as the answer", out)
	}
	if len(*seen) != 0 {
		t.Fatalf("the redirect's target was called: %q", *seen)
	}
}

// What a resume call keeps of the answer is n8n's short error message,
// never the body: a target that is not n8n cannot be read back through
// the key's message.
func TestResumeKeepsOnlyN8nsShortMessage(t *testing.T) {
	secretPage := "<html>internal admin page: db password hunter2</html>"
	long := strings.Repeat("x", 400)
	for _, c := range []struct {
		status     int
		body, want string
	}{
		{404, secretPage, "no n8n error message"},
		{409, `{"message":"` + long + `"}`, strings.Repeat("x", 120) + "…"},
		{502, secretPage, "no n8n error message"},
	} {
		srv, _ := listener(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(c.status)
			w.Write([]byte(c.body))
		})
		out := (&n8n.ResumeCaller{Targets: targets(t, srv.URL)}).Resume(context.Background(), &keystore.Record{ResumeURL: srv.URL + "/webhook-waiting/1"})
		if strings.Contains(out.Detail, "hunter2") || strings.Contains(out.Detail, long[:121]) || !strings.Contains(out.Detail, c.want) {
			t.Errorf("%d: detail %q, want only %q of the answer", c.status, out.Detail, c.want)
		}
	}
}
