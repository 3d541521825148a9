package n8n_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
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
			rc := &n8n.ResumeCaller{Secret: "s3cret"}
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
		out := (&n8n.ResumeCaller{}).Resume(context.Background(), &keystore.Record{ResumeURL: "http://" + addr + "/webhook-waiting/1"})
		if out.Answer != keystore.ResumeRetry || out.Status != 0 {
			t.Fatalf("got %+v, want retry", out)
		}
	})
}
