//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// TestParking proves that an outage loses nothing, with the shipped lead workflow in a
// real n8n: while the CRM refuses connections every lead is answered 202
// queued at once and waits in n8n (Wait node, On Webhook Call, Header
// Auth); when the CRM is back the guard resumes them and each lead is in
// the CRM exactly once. Copies add nothing, a stranger cannot wake a
// parked execution, and parked events survive a guard killed and started
// again.
func TestParking(t *testing.T) {
	s := newSuite(t, guardConfig)
	// A new connection per call: Node closes an idle keep-alive connection
	// after 5 s, and a POST that races that close is reset, not retried.
	s.web = &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	files, err := s.shippedFiles(s.guard.URL())
	if err != nil {
		t.Fatal(err)
	}
	only := map[string][]byte{}
	for name, b := range files {
		if strings.HasPrefix(name, "shipped-") {
			only[name] = b
		}
	}
	activate := []string{"n8nGuardLeadCrm1", "n8nGuardBooking1"}
	if s.install.Major() >= 2 {
		activate = append(activate, errorWorkflow)
	}
	s.noResumeCredential = true // made by n8n setup below, as a user would
	s.startN8N(t, map[string]string{}, only, activate, []string{leadPath, bookingPath}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apiKey, err := s.n8n.OwnerAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// The resume credential: `n8n setup --create-credential` makes it from
	// the guard's data folder and wires the imported workflow's Wait node;
	// a second run changes nothing; check finds nothing to say about it.
	setup := func() string {
		out, err := s.guardCLI(apiKey, "n8n", "setup", "--guard-url", s.guard.URL(), "--create-credential", "--data", s.guard.dataDir())
		if err != nil {
			t.Fatalf("n8n setup: %v\n%s", err, out)
		}
		return out
	}
	out := setup()
	for _, want := range []string{`create credential "n8n-guard resume"`, `wire the Wait nodes of n8nGuardLeadCrm1`, `wire the Wait nodes of n8nGuardBooking1`} {
		if !strings.Contains(out, want) {
			t.Fatalf("n8n setup did not %s:\n%s", want, out)
		}
	}
	if out := setup(); !strings.Contains(out, "nothing to change") {
		t.Fatalf("second n8n setup:\n%s", out)
	}
	if out, _ := s.guardCLI(apiKey, "n8n", "check"); strings.Contains(out, "checks the shipped placeholder") || strings.Contains(out, "resume calls would be refused") {
		t.Fatalf("n8n check after setup still complains about a Wait node:\n%s", out)
	}
	for _, p := range []string{leadPath, bookingPath} {
		if err := s.n8n.WaitForWebhook(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	const n = 12
	urls := map[string]string{} // key → resume URL while parked
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("evt-park-%02d", i+1)
	}

	t.Run("outage: every lead is answered 202 queued and parked, nothing written", func(t *testing.T) {
		s.crm.Refuse()
		// The first lead finds the CRM down (destination_unreachable opens
		// the breaker); the rest arrive at once during the outage.
		s.sendQueued(t, keys[:1])
		s.sendQueued(t, keys[1:])
		// The oldest lead may be out as the breaker's probe when it is
		// looked at (the cooldown is 3 s, and a loaded machine parks the
		// twelve slower than that): the CRM refuses the probe, which parks
		// it again in the same execution. So each is waited for, parked.
		for _, k := range keys {
			var rec record
			testwait.WithinEvery(t, 60*time.Second, testwait.Outside, k+" parked with a resume URL", func() bool {
				rec = s.lookup(t, "crm-contacts", k)
				return rec.State == "parked" && rec.ResumeURL != ""
			})
			urls[k] = rec.ResumeURL
		}
		if w := s.crm.TotalWrites(); w != 0 {
			t.Fatalf("CRM writes during the outage = %d, want 0", w)
		}
	})

	t.Run("copies of a parked lead answer queued and change nothing", func(t *testing.T) {
		before := s.lookup(t, "crm-contacts", keys[1])
		for _, r := range s.burst(t, leadPath, lead(keys[1], "park@example.org"), 3) {
			expect(t, r, http.StatusAccepted, "queued")
		}
		after := s.lookup(t, "crm-contacts", keys[1])
		if after.State != "parked" || after.ResumeURL != before.ResumeURL {
			t.Fatalf("after copies the record is %+v, want parked with the first resume URL %s", after, before.ResumeURL)
		}
	})

	t.Run("a stranger cannot wake a parked execution", func(t *testing.T) {
		rec := s.lookup(t, "crm-contacts", keys[2])
		id := executionID(t, rec.ResumeURL)
		calls := map[string]string{"the resume URL without the credential": rec.ResumeURL}
		if s.install.Major() >= 2 {
			u, _ := url.Parse(rec.ResumeURL)
			u.RawQuery = ""
			calls["the resume URL without its signature, with a guessed header"] = u.String()
		}
		for what, u := range calls {
			req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(`{"resumed_by":"stranger"}`))
			req.Header.Set("Content-Type", "application/json")
			if strings.Contains(what, "guessed") {
				req.Header.Set("X-N8n-Guard-Resume", "guess")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Fatalf("%s: n8n answered %d, want 401 or 403", what, resp.StatusCode)
			}
			t.Logf("%s: n8n answered %d", what, resp.StatusCode)
		}
		time.Sleep(2 * time.Second) // a woken execution would have reserved again by now
		if st, reserves := s.execution(t, apiKey, id); st != "waiting" || reserves != 1 {
			t.Fatalf("execution %s is %q with %d reserves after the stranger's calls, want waiting with 1", id, st, reserves)
		}
	})

	t.Run("the CRM is back: every lead is written exactly once", func(t *testing.T) {
		if err := s.crm.Accept(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		s.waitCompleted(t, keys, 90*time.Second)
		t.Logf("FIGURE %d parked leads caught up %.1f s after the CRM came back (cooldown 3s, catch_up_rate 5/s)", n, time.Since(start).Seconds())
		s.exactlyOnce(t, keys)
		// The resumed executions finished: nothing is left waiting. A probe
		// resumed while the CRM still refused was parked again by its fail
		// and waited again in the same execution: more than two reserves,
		// still one write.
		for _, k := range keys {
			st, reserves := s.executionEnded(t, apiKey, executionID(t, urls[k]), 30*time.Second)
			if st != "success" || reserves < 2 {
				t.Errorf("%s: its parked execution ended %q after %d reserves, want success after 2 or more", k, st, reserves)
			}
			if reserves > 2 {
				t.Logf("%s: resumed, parked again (a probe that found the CRM still down), then written: %d reserves in one execution", k, reserves)
			}
		}
	})

	t.Run("the guard is killed while leads are parked: they are caught up after its restart", func(t *testing.T) {
		more := []string{"evt-park-r1", "evt-park-r2", "evt-park-r3", "evt-park-r4"}
		s.crm.Refuse()
		s.sendQueued(t, more[:1])
		s.sendQueued(t, more[1:])
		s.guard.Kill()
		if err := s.guard.start(); err != nil {
			t.Fatal(err)
		}
		for _, k := range more {
			if rec := s.lookup(t, "crm-contacts", k); rec.State != "parked" {
				t.Fatalf("%s after the restart: %+v, want parked", k, rec)
			}
		}
		if err := s.crm.Accept(); err != nil {
			t.Fatal(err)
		}
		s.waitCompleted(t, more, 90*time.Second)
		s.exactlyOnce(t, append(more, keys...))
	})

	t.Run("the oldest parked execution was deleted in n8n: it is reported lost, the rest caught up at once", func(t *testing.T) {
		gone := []string{"evt-park-d1", "evt-park-d2", "evt-park-d3", "evt-park-d4", "evt-park-d5"}
		s.crm.Refuse()
		s.sendQueued(t, gone[:1]) // the oldest: the breaker's probe when the cooldown ends
		s.sendQueued(t, gone[1:])
		oldest := s.lookup(t, "crm-contacts", gone[0])
		if oldest.State != "parked" || oldest.ResumeURL == "" {
			t.Fatalf("%s: %+v, want parked", gone[0], oldest)
		}
		id := executionID(t, oldest.ResumeURL)
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		if err := callJSON(dctx, http.MethodDelete, s.n8n.URL()+"/api/v1/executions/"+id, "X-N8N-API-KEY", apiKey, nil, nil); err != nil {
			t.Fatalf("delete the waiting execution %s in n8n: %v", id, err)
		}
		if err := s.crm.Accept(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// cooldown 3 s + 4 / 5 per second + the lost probe's answer, not
		// the lost probe's claim + lease (4 minutes here).
		s.waitCompleted(t, gone[1:], 60*time.Second)
		t.Logf("FIGURE 4 parked leads caught up %.1f s after the CRM came back although the oldest parked execution (the probe) was deleted in n8n", time.Since(start).Seconds())
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("caught up after %s: the lost probe held the destination", took.Round(time.Second))
		}
		lost := s.lookup(t, "crm-contacts", gone[0])
		if lost.State != "parked" || lost.Reason != "resume_lost" {
			t.Fatalf("%s after its execution was deleted: %+v, want parked with reason resume_lost", gone[0], lost)
		}
		if w := s.crm.Writes(gone[0]); w != 0 {
			t.Fatalf("%s: %d CRM writes, want 0 (its execution is gone)", gone[0], w)
		}
		written := append(append([]string{}, gone[1:]...), keys...)
		s.exactlyOnce(t, append(written, "evt-park-r1", "evt-park-r2", "evt-park-r3", "evt-park-r4"))
	})

	t.Run("booking: the mail API refuses, bookings are queued and sent once each when it is back", func(t *testing.T) {
		bookings := []string{"BK-PARK-1", "BK-PARK-2", "BK-PARK-3"}
		s.mail.Refuse()
		s.sendQueuedTo(t, bookingPath, booking, bookings[:1])
		s.sendQueuedTo(t, bookingPath, booking, bookings[1:])
		for _, k := range bookings {
			if rec := s.lookup(t, "booking-confirmations", k); rec.State != "parked" {
				t.Fatalf("%s: %+v, want parked", k, rec)
			}
		}
		if err := s.mail.Accept(); err != nil {
			t.Fatal(err)
		}
		s.waitCompletedIn(t, "booking-confirmations", bookings, 90*time.Second)
		for _, k := range bookings {
			if w := s.mail.Writes(k); w != 1 {
				t.Errorf("%s: %d mails, want exactly 1", k, w)
			}
		}
	})
}

// sendQueued sends one lead per key at once and wants each answered 202
// queued.
func (s *suite) sendQueued(t *testing.T, keys []string) {
	t.Helper()
	s.sendQueuedTo(t, leadPath, func(k string) map[string]any { return lead(k, "park@example.org") }, keys)
}

// sendQueuedTo sends one event per key to path at once and wants each
// answered 202 queued.
func (s *suite) sendQueuedTo(t *testing.T, path string, event func(key string) map[string]any, keys []string) {
	t.Helper()
	var wg sync.WaitGroup
	replies := make([]reply, len(keys))
	took := make([]time.Duration, len(keys))
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			replies[i] = s.send(t, path, event(k))
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i, r := range replies {
		expect(t, r, http.StatusAccepted, "queued")
		if r.Key != keys[i] {
			t.Fatalf("answer %s names key %q, want %q", r, r.Key, keys[i])
		}
	}
	t.Logf("%d leads answered 202 queued, slowest after %v", len(keys), slowest(took))
}

func slowest(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m.Round(time.Millisecond)
}

// waitCompleted waits until every key is completed.
func (s *suite) waitCompleted(t *testing.T, keys []string, timeout time.Duration) {
	t.Helper()
	s.waitCompletedIn(t, "crm-contacts", keys, timeout)
}

// waitCompletedIn waits until every key of namespace is completed.
func (s *suite) waitCompletedIn(t *testing.T, namespace string, keys []string, timeout time.Duration) {
	t.Helper()
	var left []string
	if !testwait.PollEvery(timeout, 500*time.Millisecond, func() bool {
		left = nil
		for _, k := range keys {
			if rec := s.lookup(t, namespace, k); rec.State != "completed" {
				left = append(left, k+"="+rec.State)
			}
		}
		return len(left) == 0
	}) {
		t.Fatalf("not completed within %s: %v; see %s", timeout, left, s.work)
	}
}

// exactlyOnce: one CRM write per key, and no write for anything else.
func (s *suite) exactlyOnce(t *testing.T, keys []string) {
	t.Helper()
	for _, k := range keys {
		if w := s.crm.Writes(k); w != 1 {
			t.Errorf("%s: %d CRM writes, want exactly 1", k, w)
		}
	}
	if w := s.crm.TotalWrites(); w != len(keys) {
		t.Errorf("CRM writes in total = %d, want %d", w, len(keys))
	}
}

// executionID is the execution id in a resume URL (/webhook-waiting/<id>).
func executionID(t *testing.T, resumeURL string) string {
	t.Helper()
	u, err := url.Parse(resumeURL)
	if err != nil {
		t.Fatal(err)
	}
	_, id, ok := strings.Cut(u.Path, "/webhook-waiting/")
	if !ok || id == "" {
		t.Fatalf("resume URL %q has no /webhook-waiting/<id>", resumeURL)
	}
	return strings.Trim(id, "/")
}

// execution reads an execution through n8n's public API: its status and
// how often its Reserve key node ran.
// executionEnded is execution once the execution has stopped running: the
// guard records a key completed when the CRM write answers, and n8n ends
// the execution a moment later (a resumed one has its remaining nodes to
// run), so a status read right after the completion can still say running.
func (s *suite) executionEnded(t *testing.T, apiKey, id string, within time.Duration) (status string, reserves int) {
	t.Helper()
	testwait.PollEvery(within, testwait.Outside, func() bool {
		status, reserves = s.execution(t, apiKey, id)
		return status != "running" && status != "new"
	})
	return status, reserves
}

func (s *suite) execution(t *testing.T, apiKey, id string) (status string, reserves int) {
	t.Helper()
	var e struct {
		Status string `json:"status"`
		Data   struct {
			ResultData struct {
				RunData map[string][]any `json:"runData"`
			} `json:"resultData"`
		} `json:"data"`
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := callJSON(ctx, http.MethodGet, s.n8n.URL()+"/api/v1/executions/"+id+"?includeData=true", "X-N8N-API-KEY", apiKey, nil, &e); err != nil {
		t.Fatal(err)
	}
	return e.Status, len(e.Data.ResultData.RunData["Reserve key"])
}
