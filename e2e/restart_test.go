//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// restartConfig: the woken bound is the namespace's lease (a woken
// execution that has not reserved its key within a lease died), 90 s: long
// enough to kill and restart n8n (10 s here, more on a loaded machine)
// while the gauge still shows every woken execution.
// The cooldown is long enough for the test to bring the CRM back before
// the probe goes, so the probe finds it up and the probe is the lead the
// test lets through. catch_up_rate 0.25/s resumes the parked leads 4 s
// apart: each goes silent on its own, and each loss is its own Slack
// message (group_window 1s).
const restartConfig = `namespaces:
  crm-contacts:
    lease: 90s
    owner: U0CRMOWNER
    runbook: "Look the lead up in the CRM by its event id, then resolve the key."
destinations:
  crm:
    cooldown: 20s
    failure_threshold: 5
    unreachable_threshold: 1
    catch_up_rate: 0.25
    owner: U0CRMOWNER
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
  group_window: 1s
`

// restartBound is the woken bound of restartConfig: its lease.
const restartBound = 90 * time.Second

// TestN8NRestartWhileWoken proves that executions woken by the catch-up
// and killed with n8n are reported, not lost, with the shipped lead
// workflow in a real n8n. Leads park behind a CRM outage; when the CRM is
// back the guard resumes them, n8n answers 200, and each woken execution
// calls the guard to reserve its key again. A proxy between n8n and the
// guard holds those reserves, and n8n is killed (SIGKILL) and started
// again on its data folder: the woken executions die without reserving.
// After the woken bound each key is parked with reason resume_lost, its
// owner has one Slack message naming it, n8n_guard_parked_lost_total
// counts it, and it is never resumed again (a second proxy in front of
// n8n counts the resume calls per execution); the CRM got nothing for
// them; meanwhile n8n_guard_parked_woken shows them. The restarted n8n
// serves a new lead.
func TestN8NRestartWhileWoken(t *testing.T) {
	s := newBareSuite(t, 90*time.Second, ", n8n restarted while woken executions run")
	// A new connection per call: Node closes an idle keep-alive connection
	// after 5 s, and a POST that races that close is reset, not retried.
	s.web = &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	// The guard calls resume URLs through front (WEBHOOK_URL); n8n calls
	// the guard through back.
	front, err := startResumeProxy(fmt.Sprintf("http://127.0.0.1:%d", s.n8nPort))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	resumeOrigins := fmt.Sprintf("N8N_GUARD_RESUME_ORIGINS=http://localhost:%d,http://127.0.0.1:%d", front.port, front.port)
	if s.guard, err = startGuard(s.guardBin, s.work, restartConfig, guardToken, s.slack.APIURL(), resumeOrigins); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.guard.Stop)
	back, err := startStallingProxy(s.guard.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Close)

	files, err := s.shippedFiles(back.URL())
	if err != nil {
		t.Fatal(err)
	}
	only := map[string][]byte{}
	for name, b := range files {
		if strings.HasPrefix(name, "shipped-") {
			only[name] = b
		}
	}
	activate := []string{"n8nGuardLeadCrm1"}
	if s.install.Major() >= 2 {
		activate = append(activate, errorWorkflow)
	}
	s.startN8N(t, map[string]string{"WEBHOOK_URL": fmt.Sprintf("http://localhost:%d/", front.port)}, only, activate, []string{leadPath}, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	apiKey, err := s.n8n.OwnerAPIKey(ctx)
	if err != nil {
		t.Fatal(err)
	}

	probe := "evt-restart-probe"
	keys := []string{"evt-restart-1", "evt-restart-2", "evt-restart-3"}
	execs := map[string]string{} // key → its parked execution

	// The outage: the probe lead finds the CRM down and opens the breaker;
	// the others are parked at once.
	s.crm.Refuse()
	opened := time.Now() // at the latest: the probe lead's fail opens the breaker
	s.sendQueued(t, []string{probe})
	s.sendQueued(t, keys)
	for _, k := range append([]string{probe}, keys...) {
		rec := s.lookup(t, "crm-contacts", k)
		if rec.State != "parked" || rec.ResumeURL == "" {
			t.Fatalf("%s: record %+v, want parked with a resume URL", k, rec)
		}
		execs[k] = executionID(t, rec.ResumeURL)
	}
	// From now on the reserves of the three keys reach no guard: their
	// woken executions hang in Reserve key until n8n dies.
	back.Stall(keys...)
	if err := s.crm.Accept(); err != nil {
		t.Fatal(err)
	}
	upAfter := time.Since(opened)
	t.Logf("CRM back %.1f s after the breaker opened (cooldown 20 s)", upAfter.Seconds())
	if upAfter > 15*time.Second {
		t.Fatalf("the CRM came back %s after the breaker opened, too close to the 20 s cooldown: the probe may have found it down", upAfter.Round(time.Second))
	}

	// The probe goes through and closes the breaker; then the three are
	// resumed, n8n answers 200 and their executions call Reserve key.
	s.waitCompleted(t, []string{probe}, 90*time.Second)
	woken := map[string]time.Time{} // key → resume_sent_at
	testwait.WithinEvery(t, 2*time.Minute, testwait.Outside, "the three woken executions reserving (held by the proxy), n8n's 200 recorded", func() bool {
		for _, k := range keys {
			if back.Held(k) == 0 || !front.Accepted(execs[k]) {
				return false
			}
			rec := s.keyState(t, k)
			if rec.ResumeSentAt == nil {
				return false
			}
			woken[k] = *rec.ResumeSentAt
		}
		return true
	})
	if order := front.Order(); len(order) == 0 || order[0] != execs[probe] {
		t.Fatalf("the probe's execution %s was not the first resumed: resume calls in order %v", execs[probe], order)
	}
	var lastWoken time.Time
	for _, k := range keys {
		t.Logf("%s: execution %s woken at %s (resume calls %v), its reserve held by the proxy", k, execs[k], woken[k].Format(time.RFC3339Nano), front.Statuses(execs[k]))
		if woken[k].After(lastWoken) {
			lastWoken = woken[k]
		}
	}

	// n8n dies while the woken executions run, and starts again on the
	// same data folder.
	killed := time.Now()
	s.n8n.kill()
	back.Unstall()
	if err := s.n8n.Start(); err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer rcancel()
	if err := s.n8n.WaitReady(rctx); err != nil {
		t.Fatal(err)
	}
	if err := s.n8n.WaitForWebhook(rctx, leadPath); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE n8n killed (SIGKILL) and serving again after %.1f s", time.Since(killed).Seconds())

	// The restarted n8n serves: a new lead is written once.
	after := "evt-restart-after"
	expect(t, s.send(t, leadPath, lead(after, "after@example.org")), http.StatusOK, "accepted")
	for _, k := range keys {
		st, reserves := s.execution(t, apiKey, execs[k])
		t.Logf("%s: execution %s after the restart: %q, Reserve key ran %d times", k, execs[k], st, reserves)
		switch st {
		case "success", "waiting", "running", "new":
			t.Errorf("%s: execution %s is %q after n8n was killed while it ran, want it dead (crashed)", k, execs[k], st)
		}
	}

	// Within the bound: every key is recorded lost. Until then the woken
	// gauge shows them.
	maxWoken := 0.0
	lostAt := map[string]time.Time{}
	deadline := lastWoken.Add(restartBound + 90*time.Second) // the bound, and a sweep's minute to spare
	if !testwait.PollEvery(time.Until(deadline), time.Second, func() bool {
		if m, err := s.guardMetrics(); err == nil {
			maxWoken = max(maxWoken, m.value("n8n_guard_parked_woken", `destination="crm"`))
		}
		for _, k := range keys {
			if _, ok := lostAt[k]; ok {
				continue
			}
			rec := s.keyState(t, k)
			switch {
			case rec.State == "parked" && rec.Reason == "resume_lost":
				lostAt[k] = time.Now()
				t.Logf("FIGURE %s recorded resume_lost %.1f s after it was woken (bound %s): %s", k, time.Since(woken[k]).Seconds(), restartBound, rec.Message)
				if early := woken[k].Add(restartBound); time.Now().Before(early) {
					t.Errorf("%s recorded lost %s before its woken bound ended", k, early.Sub(time.Now()).Round(time.Millisecond))
				}
				if !strings.Contains(rec.Message, "woken at") {
					t.Errorf("%s: message %q does not say when it was woken", k, rec.Message)
				}
			case rec.State != "parked":
				t.Fatalf("%s: %+v while its woken execution was dead, want parked", k, rec.record)
			}
		}
		return len(lostAt) == len(keys)
	}) {
		t.Fatalf("not all recorded resume_lost by %s (woken bound %s after the last wake, and 90 s): lost %v; see %s", deadline.Format(time.RFC3339), restartBound, lostAt, s.work)
	}
	if maxWoken != float64(len(keys)) {
		t.Errorf("n8n_guard_parked_woken{destination=\"crm\"} showed at most %v while the executions were woken, want %d", maxWoken, len(keys))
	}

	// The owner is told once per key, the metric counts them, and the
	// gauge lets go of them at its next count (once a minute).
	// The message says why (docs/runbooks.md: "woken at …, the execution
	// did not reserve the key again").
	for _, k := range keys {
		s.waitSlack(t, 30*time.Second, "Parked event lost in n8n", k, "U0CRMOWNER", "woken at", "did not reserve the key again",
			"the execution died before it reserved the key again")
	}
	// The outage's message ends honest: the woken executions that died are
	// lost, not resumed (before: "caught up: 4 resumed, 0 lost" for good).
	s.waitSlack(t, 60*time.Second, "caught up: 1 resumed, 3 lost (owner told)")
	for _, msg := range s.slack.Messages() {
		if strings.Contains(msg.Content(), "caught up: 4 resumed") {
			t.Errorf("the outage was shown caught up with the woken executions counted resumed: %s", tail(msg.Content(), 300))
		}
	}

	testwait.WithinEvery(t, 90*time.Second, testwait.Outside, "n8n_guard_parked_woken back to 0", func() bool {
		m, err := s.guardMetrics()
		return err == nil && m.value("n8n_guard_parked_woken", `destination="crm"`) == 0
	})
	m, err := s.guardMetrics()
	if err != nil {
		t.Fatal(err)
	}
	if lost := m.value("n8n_guard_parked_lost_total", `destination="crm"`); lost != float64(len(keys)) {
		t.Errorf("n8n_guard_parked_lost_total{destination=\"crm\"} = %v, want %d", lost, len(keys))
	}
	t.Logf("resume calls by answer: accepted %v, lost %v, retry %v",
		m.value("n8n_guard_resume_calls_total", `answer="accepted"`, `destination="crm"`),
		m.value("n8n_guard_resume_calls_total", `answer="lost"`, `destination="crm"`),
		m.value("n8n_guard_resume_calls_total", `answer="retry"`, `destination="crm"`))
	posts := map[string]int{}
	for _, msg := range s.slack.Messages() {
		if msg.Method != "chat.postMessage" || !strings.Contains(msg.Content(), "Parked event lost in n8n") {
			continue
		}
		for _, k := range append([]string{probe, after}, keys...) {
			if strings.Contains(msg.Content(), k+" ") || strings.Contains(msg.Content(), k+"`") || strings.Contains(msg.Content(), k+"\"") {
				posts[k]++
			}
		}
		if !strings.Contains(msg.Content(), "U0CRMOWNER") {
			t.Errorf("a parked_lost message does not name the owner U0CRMOWNER: %s", tail(msg.Content(), 400))
		}
	}
	for _, k := range keys {
		if posts[k] != 1 {
			t.Errorf("%s: %d Slack messages about its loss, want exactly 1", k, posts[k])
		}
	}
	for _, k := range []string{probe, after} {
		if posts[k] != 0 {
			t.Errorf("%s was written, yet %d Slack messages say it was lost", k, posts[k])
		}
	}

	// Nothing was resumed twice, nothing written for the lost keys, and
	// the dead executions never came back to the guard.
	for _, k := range keys {
		if n := front.Calls(execs[k]); n != 1 {
			t.Errorf("%s: n8n got %d resume calls for execution %s (%v), want exactly 1", k, n, execs[k], front.Statuses(execs[k]))
		}
		if w := s.crm.Requests(k); w != 0 {
			t.Errorf("%s: %d CRM requests, want none (its execution died before its reserve)", k, w)
		}
		if n := back.After(k); n != 0 {
			t.Errorf("%s: %d calls to the guard after n8n restarted, want none (its execution died)", k, n)
		}
		if rec := s.keyState(t, k); rec.State != "parked" || rec.Reason != "resume_lost" {
			t.Errorf("%s at the end: %+v, want parked with reason resume_lost", k, rec.record)
		}
	}
	s.exactlyOnce(t, []string{probe, after})
	log, err := os.ReadFile(s.guard.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "woken execution went silent"); n != len(keys) {
		t.Errorf("the guard logged %d silent woken executions, want %d (one line per key)", n, len(keys))
	}
	// Its closing line counts them lost, not resumed.
	if !strings.Contains(string(log), "caught up: 1 resumed, 3 lost (owner told)") || strings.Contains(string(log), "caught up: 4 resumed") {
		t.Errorf("the guard's caught-up line does not say 1 resumed, 3 lost:\n%s", tail(string(log), 2000))
	}
}

// keyRecord is a key's record with the time n8n took its resume call.
type keyRecord struct {
	record
	ResumeSentAt *time.Time `json:"resume_sent_at"`
}

func (s *suite) keyState(t *testing.T, key string) keyRecord {
	t.Helper()
	raw, err := s.guard.api.Lookup(context.Background(), "crm-contacts", key)
	if err != nil {
		t.Fatalf("lookup %s: %v", key, err)
	}
	var rec keyRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// kill ends n8n and its task runner with SIGKILL: running executions get
// no chance to finish or to record anything.
func (n *n8nInstance) kill() {
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
	fmt.Fprintf(n.logf, "\n=== e2e: n8n killed with SIGKILL at %s ===\n\n", time.Now().Format(time.RFC3339Nano))
}

// promText is the guard's /metrics, one sample per line.
type promText []string

func (s *suite) guardMetrics() (promText, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(s.guard.URL() + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	var lines promText
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

// value is the sample of name whose labels contain every one of labels
// (0 when there is none).
func (p promText) value(name string, labels ...string) float64 {
	for _, l := range p {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		ok := true
		for _, lb := range labels {
			ok = ok && strings.Contains(l, lb)
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err == nil {
			return f
		}
	}
	return 0
}

// resumeProxy stands for n8n at its WEBHOOK_URL: it passes every request
// on (Host header and all) and counts the resume calls per execution with
// n8n's answers.
type resumeProxy struct {
	upstream string
	port     int
	srv      *http.Server

	mu       sync.Mutex
	statuses map[string][]int // execution id → n8n's answers to its resume calls
	order    []string         // execution ids in the order of their resume calls
}

func startResumeProxy(upstream string) (*resumeProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &resumeProxy{upstream: upstream, port: ln.Addr().(*net.TCPAddr).Port, statuses: map[string][]int{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.handle), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

func (p *resumeProxy) Close() { p.srv.Close() }

// Calls is how many resume calls reached the proxy for execution id.
func (p *resumeProxy) Calls(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.statuses[id])
}

// Statuses are n8n's answers to execution id's resume calls (0: none).
func (p *resumeProxy) Statuses(id string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.statuses[id]...)
}

// Order is the execution ids of the resume calls, in the order they came.
func (p *resumeProxy) Order() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.order...)
}

// Accepted: n8n answered a resume call of execution id 2xx.
func (p *resumeProxy) Accepted(id string) bool {
	for _, st := range p.Statuses(id) {
		if st >= 200 && st < 300 {
			return true
		}
	}
	return false
}

func (p *resumeProxy) handle(w http.ResponseWriter, r *http.Request) {
	_, id, waiting := strings.Cut(r.URL.Path, "/webhook-waiting/")
	id = strings.Trim(id, "/")
	if waiting {
		p.mu.Lock()
		p.order = append(p.order, id)
		p.mu.Unlock()
	}
	body, _ := io.ReadAll(r.Body)
	status := 0
	defer func() {
		if waiting {
			p.mu.Lock()
			p.statuses[id] = append(p.statuses[id], status)
			p.mu.Unlock()
		}
	}()
	up, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	up.Header = r.Header.Clone()
	up.Host = r.Host // as the guard called it: n8n's WEBHOOK_URL
	resp, err := http.DefaultClient.Do(up)
	if err != nil {
		status = http.StatusBadGateway
		http.Error(w, err.Error(), status)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	status = resp.StatusCode
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// stallingProxy stands for the guard where n8n's workflows call it. It
// passes everything on, except the calls for the keys it is told to
// stall: those it holds, unanswered and never passed on, until the
// caller gives up (n8n dies) or it is told to stop stalling.
type stallingProxy struct {
	upstream string
	srv      *http.Server
	addr     string

	mu      sync.Mutex
	stall   map[string]bool
	held    map[string]int // calls held, per key
	after   map[string]int // calls for a stalled key after Unstall
	was     map[string]bool
	release chan struct{}
}

func startStallingProxy(upstream string) (*stallingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &stallingProxy{upstream: upstream, addr: ln.Addr().String(), stall: map[string]bool{},
		held: map[string]int{}, after: map[string]int{}, was: map[string]bool{}, release: make(chan struct{})}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.handle), ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	return p, nil
}

func (p *stallingProxy) URL() string { return "http://" + p.addr }

func (p *stallingProxy) Close() {
	p.Unstall()
	p.srv.Close()
}

// Stall holds every later call for these keys.
func (p *stallingProxy) Stall(keys ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		p.stall[k], p.was[k] = true, true
	}
}

// Unstall passes calls on again (and lets held ones go unanswered).
func (p *stallingProxy) Unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stall) > 0 {
		close(p.release)
		p.release = make(chan struct{})
	}
	p.stall = map[string]bool{}
}

// Held is how many calls for key were held.
func (p *stallingProxy) Held(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held[key]
}

// After is how many calls for a once stalled key came after Unstall.
func (p *stallingProxy) After(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.after[key]
}

func (p *stallingProxy) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := keyOf(body)
	p.mu.Lock()
	hold, release := key != "" && p.stall[key], p.release
	if hold {
		p.held[key]++
	} else if key != "" && p.was[key] {
		p.after[key]++
	}
	p.mu.Unlock()
	if hold {
		select {
		case <-r.Context().Done():
		case <-release:
		case <-time.After(10 * time.Minute):
		}
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
		}
		return
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
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}
