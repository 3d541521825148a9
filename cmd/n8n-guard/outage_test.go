package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/internal/logbuf"
	"github.com/n8n-guard/n8n-guard/internal/pgtest"
	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

func writeConfig(t *testing.T, yaml string) FileConfig {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	fc, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fc
}

// A destination outage: the CRM is unreachable, 10,000 reserves arrive
// while its breaker is open. None is recorded, the log stays quiet, and the
// destination's owner hears exactly twice: when writes pause and when they
// resume, with the number of paused reserves.
func TestDestinationOutage(t *testing.T) {
	slack := slacktest.New(t)
	clock := fakeclock.New()
	cfg := Config{
		Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"}, Clock: clock.Now,
		SlackBotToken: "xoxb-test", SlackAPIURL: slack.APIURL(),
		File: writeConfig(t, `
destinations:
  hubspot:
    cooldown: 5m
    failure_threshold: 5
    unreachable_threshold: 1     # the CRM's own namespace reports it: one refused connection is enough
    namespaces: [crm-contacts]
    owner: U0CRM
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
`),
	}
	logs := &logbuf.Buffer{}
	m := NewMain(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	base := "http://" + m.Addr()
	reserve := func(key string) map[string]any {
		_, a := call(t, base, "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": key, "destination": "hubspot"})
		return a
	}

	first := reserve("evt_0")
	if first["outcome"] != "accepted" {
		t.Fatalf("first reserve: %v", first)
	}
	_, f := call(t, base, "tok", http.MethodPost, "/v1/fail", map[string]any{"namespace": "crm-contacts", "key": "evt_0", "token": first["token"], "reason": "destination_unreachable", "message": "dial tcp: connection refused"})
	if f["outcome"] != "destination_failed" {
		t.Fatalf("fail: %v", f)
	}

	const storm = 10000
	logLinesBefore := strings.Count(logs.String(), "\n")
	var paused, other atomic.Int64
	var wg sync.WaitGroup
	keys := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				a := reserve(fmt.Sprintf("evt_%d", i))
				if a["outcome"] == "destination_paused" && a["proceed"] == false {
					paused.Add(1)
				} else {
					other.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	for i := 1; i <= storm; i++ {
		keys <- i
	}
	close(keys)
	wg.Wait()
	if paused.Load() != storm {
		t.Fatalf("%d of %d reserves during the outage were paused", paused.Load(), storm)
	}
	if n := strings.Count(logs.String(), "\n") - logLinesBefore; n > 2 {
		t.Fatalf("%d log lines during the outage, want at most 2:\n%s", n, logs)
	}
	_, page := call(t, base, "tok", http.MethodGet, "/v1/keys?namespace=crm-contacts&limit=1000", nil)
	if items := page["items"].([]any); len(items) != 1 {
		t.Fatalf("%d keys recorded, want only evt_0 (paused reserves record nothing)", len(items))
	}

	// The CRM is back: after the cooldown one probe goes through and closes
	// the breaker.
	clock.Advance(5 * time.Minute)
	probe := reserve("evt_1")
	if probe["outcome"] != "accepted" {
		t.Fatalf("probe after the cooldown: %v", probe)
	}
	if again := reserve("evt_2"); again["outcome"] != "destination_paused" {
		t.Fatalf("a second reserve while probing: %v", again)
	}
	_, c := call(t, base, "tok", http.MethodPost, "/v1/complete", map[string]any{"namespace": "crm-contacts", "key": "evt_1", "token": probe["token"], "result_ref": "crm-1"})
	if c["outcome"] != "completed" {
		t.Fatalf("probe complete: %v", c)
	}
	_, dests := call(t, base, "tok", http.MethodGet, "/v1/destinations", nil)
	if d := dests["items"].([]any)[0].(map[string]any); d["state"] != "closed" {
		t.Fatalf("destination after the probe: %v", d)
	}

	want := fmt.Sprint(storm + 1) // the storm and the reserve during the probe
	// Each call as "method: text".
	var calls, hubspot []string
	if !testwait.Poll(20*time.Second, func() bool {
		calls, hubspot = nil, nil
		for _, c := range slack.Calls() {
			calls = append(calls, c.Method+": "+c.Text)
			if strings.Contains(c.Text, "hubspot") {
				hubspot = append(hubspot, c.Method+": "+c.Text)
			}
		}
		return len(hubspot) >= 2
	}) || len(hubspot) > 2 {
		t.Fatalf("Slack calls about hubspot: %d, want 2:\n%s", len(hubspot), strings.Join(calls, "\n"))
	}
	if !strings.Contains(hubspot[0], "paused") || !strings.Contains(strings.ReplaceAll(hubspot[1], ",", ""), want) {
		t.Fatalf("Slack got:\n%s\nwant an open message, then a close message counting %s paused reserves", strings.Join(hubspot, "\n"), want)
	}
	if !strings.Contains(hubspot[0], "U0CRM") {
		t.Fatalf("the open message does not mention the destination's owner: %s", hubspot[0])
	}
	// Nothing more may follow: the guard's clock stands still, so two
	// whole rounds of notify after the close message have delivered all
	// it would ever send about this outage.
	seen := m.notes.Rounds()
	testwait.For(t, "two rounds of notify after the close message", func() bool { return m.notes.Rounds() >= seen+2 })
	if n := len(slack.Calls()); n != len(calls) {
		t.Fatalf("Slack got %d calls, then %d more", len(calls), n-len(calls))
	}
	t.Logf("%d reserves paused in %.1fs; Slack calls: %d", storm, time.Since(start).Seconds(), len(calls))
}

// Two n8n-guard servers on one PostgreSQL database behave as one: copies
// of an event sent to both at once, alternating, are accepted once; the
// winner's token completes through the other server.
func TestTwoServersOnePostgres(t *testing.T) {
	u := pgtest.FreshSchema(t, pgtest.URL(t, "the two-servers test"))
	var servers []string
	for i := 0; i < 2; i++ {
		m := NewMain(Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Tokens: []string{"tok"}, Store: u}, nil)
		if err := m.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		servers = append(servers, "http://"+m.Addr())
	}
	for round := 0; round < 10; round++ {
		key := fmt.Sprintf("evt_%d", round)
		var accepted atomic.Int32
		var token atomic.Value
		var wg sync.WaitGroup
		for c := 0; c < 20; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				_, a := call(t, servers[c%2], "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": key})
				if a["outcome"] == "accepted" {
					accepted.Add(1)
					token.Store(a["token"])
				}
			}(c)
		}
		wg.Wait()
		if accepted.Load() != 1 {
			t.Fatalf("round %d: %d accepted across two servers, want 1", round, accepted.Load())
		}
		for i, s := range servers {
			_, c := call(t, s, "tok", http.MethodPost, "/v1/complete", map[string]any{"namespace": "crm-contacts", "key": key, "token": token.Load(), "result_ref": "crm-" + key})
			if c["outcome"] != "completed" {
				t.Fatalf("complete through server %d: %v", i, c)
			}
		}
		_, d := call(t, servers[(round+1)%2], "tok", http.MethodPost, "/v1/reserve", map[string]any{"namespace": "crm-contacts", "key": key})
		if d["outcome"] != "duplicate_event" || d["result_ref"] != "crm-"+key {
			t.Fatalf("after complete: %v", d)
		}
	}
}
