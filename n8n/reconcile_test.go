package n8n_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// What a check's answers come to: found and absent are taken; what may
// change on another call (5xx, 429, no answer) is tried again; the rest
// is no usable answer at once (the person is paged).
func TestCheckAnswers(t *testing.T) {
	cases := []struct {
		name   string
		status int
		body   string
		want   keystore.CheckResult
		ref    string
		retry  bool
	}{
		{"found", 200, `{"result":"found","reference":"crm-7","workflow":"lead check","execution":"12"}`, keystore.CheckFound, "crm-7", false},
		{"found, as n8n's one-item array", 200, `[{"result":"found","reference":" crm-8 "}]`, keystore.CheckFound, "crm-8", false},
		{"absent", 200, `{"result":"absent"}`, keystore.CheckAbsent, "", false},
		{"found without a reference", 200, `{"result":"found"}`, keystore.CheckFailed, "", false},
		{"a reference with a control character", 200, `{"result":"found","reference":"crm\u0007"}`, keystore.CheckFailed, "", false},
		{"another result", 200, `{"result":"maybe"}`, keystore.CheckFailed, "", false},
		{"n8n's 'Workflow was started' (webhook not answering from a node)", 200, `{"message":"Workflow was started"}`, keystore.CheckFailed, "", false},
		{"garbage", 200, `<html>hello</html>`, keystore.CheckFailed, "", false},
		{"an empty body (n8n 1.x: the workflow failed)", 200, ``, keystore.CheckFailed, "", true},
		{"500 Error in workflow", 500, `{"code":0,"message":"Error in workflow"}`, keystore.CheckFailed, "", true},
		{"429", 429, `{"message":"slow down"}`, keystore.CheckFailed, "", true},
		{"403: the credential is wrong", 403, `{"code":403,"message":"Authorization data is wrong!"}`, keystore.CheckFailed, "", false},
		{"404: the workflow is not published", 404, `{"code":404,"message":"The requested webhook is not registered."}`, keystore.CheckFailed, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Check-Auth") != "s3cret" || r.Method != http.MethodPost {
					w.WriteHeader(http.StatusForbidden)
					return
				}
				w.WriteHeader(c.status)
				fmt.Fprint(w, c.body)
			}))
			defer srv.Close()
			cc := &n8n.CheckCaller{URL: srv.URL, Header: "X-Check-Auth", Secret: "s3cret"}
			out := cc.Call(context.Background(), n8n.CheckRequest{Namespace: "leads", Key: "evt-1", Attempt: 1})
			if out.Answer.Result != c.want || out.Answer.Reference != c.ref || out.Retry != c.retry {
				t.Fatalf("got %+v retry %v, want %s %q retry %v", out.Answer, out.Retry, c.want, c.ref, c.retry)
			}
			if c.want == keystore.CheckFailed && out.Answer.Detail == "" {
				t.Fatal("no usable answer without saying why")
			}
		})
	}
	t.Run("no answer in time", func(t *testing.T) {
		gone := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-gone:
			}
		}))
		defer srv.Close()
		defer close(gone)
		out := (&n8n.CheckCaller{URL: srv.URL, Timeout: 50 * time.Millisecond}).Call(context.Background(), n8n.CheckRequest{})
		if out.Answer.Result != keystore.CheckFailed || !out.Retry || out.Answer.Detail != "the check did not answer within 50ms" {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		u := srv.URL
		srv.Close()
		if out := (&n8n.CheckCaller{URL: u}).Call(context.Background(), n8n.CheckRequest{}); !out.Retry {
			t.Fatalf("%+v", out)
		}
	})
}
