package n8n_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// A resume URL on n8n's public address is called at the private one the
// operator gave: the same method, path and query (n8n 2.x's signature),
// the same header credential and body; only the scheme, host and port
// differ. The public address is never called.
func TestResumeOfAPublicURLGoesToThePrivateAddress(t *testing.T) {
	public, publicSeen := listener(t, nil)
	type call struct {
		method, uri, secret, ctype string
		body                       n8n.ResumeBody
	}
	calls := make(chan call, 1)
	private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := call{method: r.Method, uri: r.URL.RequestURI(), secret: r.Header.Get(n8n.ResumeDefaultHeader), ctype: r.Header.Get("Content-Type")}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &c.body)
		calls <- c
		w.Write([]byte(`{"message":"Workflow was started"}`))
	}))
	t.Cleanup(private.Close)
	tg, err := keystore.ResumeTargets{}.WithPublic(public.URL, private.URL)
	if err != nil {
		t.Fatal(err)
	}
	rc := &n8n.ResumeCaller{Secret: "s3cret", Targets: tg}
	out := rc.Resume(context.Background(), &keystore.Record{Namespace: "crm-contacts", Key: "evt_1", Attempt: 2,
		ResumeURL: public.URL + "/webhook-waiting/12?signature=abc"})
	if out.Answer != keystore.ResumeAccepted {
		t.Fatalf("%+v, want accepted", out)
	}
	var got call
	select { // the handler sent it before answering: Resume has returned
	case got = <-calls:
	default:
		t.Fatalf("the private address was not called (public: %q)", *publicSeen)
	}
	want := call{method: http.MethodPost, uri: "/webhook-waiting/12?signature=abc", secret: "s3cret", ctype: "application/json",
		body: n8n.ResumeBody{ResumedBy: "n8n-guard", Namespace: "crm-contacts", Key: "evt_1", Attempt: 2}}
	if got != want {
		t.Fatalf("the private address got %+v, want %+v", got, want)
	}
	if len(*publicSeen) != 0 {
		t.Fatalf("the public address was called: %q", *publicSeen)
	}
}
