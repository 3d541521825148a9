//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/keystore"
)

const lostAnswerPath = "n8n-guard-e2e/lost-answer"

// TestLostReserveAnswer: the guard decides, and its answer is lost on the
// way back. A proxy between n8n and the guard passes the first reserve of
// each key to the guard (which answers accepted) and then drops the answer;
// the HTTP node times out after 1.5 s and n8n's Retry On Fail sends the
// same reserve again. With its request_id (execution id + node name) the
// repeat gets the same token, so the workflow goes on: exactly one CRM
// write, the key completed, no key unknown and nobody paged. Without
// request_id support the repeat got in_progress, the CRM got nothing and
// the key went unknown when the lease ran out.
//
// It runs its own n8n (the workflow in testdata/lostanswer, pointed at the
// proxy), so the shared suite's setup stays as it is.
func TestLostReserveAnswer(t *testing.T) {
	s := newSuite(t, "namespaces:\n  crm-contacts:\n    lease: 120s\n    owner: U0CRMOWNER\n")
	proxy, err := startLosingProxy(s.guard.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	b, err := os.ReadFile(filepath.Join(s.repo, "e2e", "testdata", "lostanswer", "workflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	wf := strings.NewReplacer("__GUARD_URL__", proxy.URL(), "__CRM_URL__", s.crm.URL()).Replace(string(b))
	s.startN8N(t, nil, map[string][]byte{"lost-answer.json": []byte(wf)}, []string{"n8nGuardE2eLost1"}, []string{lostAnswerPath}, false)
	n, g, crm, slack := s.n8n, s.guard, s.crm, s.slack

	for _, key := range []string{"evt-lost-1", "evt-lost-2"} {
		reply := postJSON(t, n.URL()+"/webhook/"+lostAnswerPath, map[string]any{"event_id": key, "email": "ada@example.org"})
		if reply["outcome"] != "completed" || reply["repeat"] != true || reply["result_ref"] == "" {
			t.Fatalf("%s: the webhook answered %v; want completed after a repeated reserve (proxy: %d reserves seen, %d answers dropped)",
				key, reply, proxy.Reserves(key), proxy.Dropped(key))
		}
		if d, r := proxy.Dropped(key), proxy.Reserves(key); d != 1 || r != 2 {
			t.Fatalf("%s: proxy dropped %d answers of %d reserves, want 1 of 2 (the lost one and its repeat)", key, d, r)
		}
		if w := crm.Writes(key); w != 1 {
			t.Fatalf("%s: CRM writes = %d, want exactly 1", key, w)
		}
		rec := lookupRecord(t, g, key)
		if rec.State != "completed" || rec.Attempt != 1 || rec.ResultRef != reply["result_ref"] {
			t.Fatalf("%s: guard record %+v, want completed, attempt 1, result_ref %v", key, rec, reply["result_ref"])
		}
	}
	unknown, err := g.api.Keys(context.Background(), client.KeyQuery{State: keystore.StateUnknown})
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown.Items) != 0 {
		t.Fatalf("keys unknown: %+v", unknown.Items)
	}
	if msgs := slack.Messages(); len(msgs) != 0 {
		t.Fatalf("someone was paged: %+v", msgs)
	}
}

func lookupRecord(t *testing.T, g *guard, key string) record {
	t.Helper()
	rec, err := g.Lookup("crm-contacts", key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func postJSON(t *testing.T, url string, body any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	c := &http.Client{Timeout: 90 * time.Second}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("POST %s: HTTP %d %s", url, resp.StatusCode, raw)
	}
	return m
}

// losingProxy forwards everything to the guard, but loses the answer to the
// first reserve of each key: the guard has decided (and committed), the
// client never hears it, as when a network or a load balancer drops it.
type losingProxy struct {
	upstream string
	srv      *http.Server
	addr     string

	mu       sync.Mutex
	reserves map[string]int
	dropped  map[string]int
}

func startLosingProxy(upstream string) (*losingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &losingProxy{upstream: upstream, addr: ln.Addr().String(), reserves: map[string]int{}, dropped: map[string]int{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.handle), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

func (p *losingProxy) URL() string { return "http://" + p.addr }

func (p *losingProxy) Close() { p.srv.Close() }

func (p *losingProxy) Reserves(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reserves[key]
}

func (p *losingProxy) Dropped(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dropped[key]
}

func (p *losingProxy) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	drop := false
	if r.URL.Path == "/v1/reserve" {
		key := keyOf(body)
		p.mu.Lock()
		p.reserves[key]++
		drop = p.reserves[key] == 1
		p.mu.Unlock()
	}
	up, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if drop {
		// The guard has answered; the client waits until it gives up,
		// then the connection is cut without a byte of the answer.
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		p.mu.Lock()
		p.dropped[keyOf(body)]++
		p.mu.Unlock()
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
		return
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

func keyOf(body []byte) string {
	var req struct {
		Key string `json:"key"`
	}
	_ = json.Unmarshal(body, &req)
	return req.Key
}
