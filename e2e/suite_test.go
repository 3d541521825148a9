//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ids fixed in the shipped workflows and in testdata/.
const (
	credentialID   = "n8nGuardApiToken"
	credentialName = "n8n-guard API token"
	errorWorkflow  = "n8nGuardErrors01"
	guardToken     = "e2e-token-3f9a1c"
)

// activated are the workflows switched on before n8n starts. The error
// workflow is not among them: in n8n 1.x it must stay inactive.
var activated = []string{"n8nGuardLeadCrm1", "n8nGuardBooking1", "n8nGuardE2eThrow", "n8nGuardE2eDedup", templatesWorkflowID}

// guardConfig routes alerts to owners the tests can recognise in Slack.
// Breakers cool down in seconds so the breaker case stays short.
const guardConfig = `namespaces:
  crm-contacts:
    lease: 120s
    owner: U0CRMOWNER
    runbook: "Look the lead up in the CRM by its event id, then resolve the key."
  booking-confirmations:
    lease: 120s
    owner: U0OFFICE
    runbook: "Check the mail provider's delivery log for the booking number."
destinations:
  crm:
    cooldown: 3s
    failure_threshold: 5
    owner: U0CRMOWNER
  mail:
    cooldown: 3s
    failure_threshold: 5
    owner: U0OFFICE
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
  group_window: 1s
owners:
  - workflow: "e2e-*"
    owner: U0E2EOWNER
    channel: C0E2E
    runbook: "Fix the field mapping, then re-run the execution."
    deadline: 4h
`

// suite is everything one run needs: the real n8n and guard, the fakes.
type suite struct {
	repo  string
	work  string
	n8n   *n8nInstance
	guard *guard
	crm   *target
	mail  *target
	slack *fakeSlack
	web   *http.Client

	// communityReady: n8n-nodes/dist was loaded and a workflow using it imported.
	communityReady string // empty when ready, else why not
}

func setup(t *testing.T) *suite {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{repo: repo, work: filepath.Join(repo, "e2e", ".work"), web: &http.Client{Timeout: 90 * time.Second}}
	if err := os.RemoveAll(s.work); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("logs and data of this run: %s", s.work)

	n8nBin := ensureN8N(t)
	guardBin, err := buildGuard(repo, s.work)
	if err != nil {
		t.Fatal(err)
	}

	if s.crm, err = startTarget("crm", "id", "crm-contact", http.StatusCreated); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.crm.Close)
	if s.mail, err = startTarget("mail", "message_id", "msg", http.StatusAccepted); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.mail.Close)
	if s.slack, err = startFakeSlack(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.slack.Close)
	t.Cleanup(func() { s.slack.Dump(filepath.Join(s.work, "slack.json")) })

	if s.guard, err = startGuard(guardBin, s.work, guardConfig, guardToken, s.slack.APIURL()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.guard.Stop)

	env := map[string]string{
		// The documented variables the shipped Config nodes read.
		"N8N_GUARD_URL": s.guard.URL(),
		"CRM_BASE_URL":  s.crm.URL(),
		"MAIL_API_URL":  s.mail.URL(),
		// Short timeouts keep the timeout cases short.
		"CRM_TIMEOUT_MS":  "3000",
		"MAIL_TIMEOUT_MS": "3000",
	}
	community := s.communityNode(env)
	s.n8n, err = newN8N(n8nBin, filepath.Join(s.work, "n8n"), env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.n8n.Stop)
	if err := s.importAll(community); err != nil {
		t.Fatal(err)
	}
	if err := s.n8n.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	paths := []string{"n8n-guard/lead", "n8n-guard/booking", "n8n-guard-e2e/throw", "n8n-guard-e2e/dedupe", templatesPath}
	if len(community) > 0 {
		paths = append(paths, communityPath)
	}
	for _, p := range paths {
		if err := s.n8n.WaitForWebhook(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// importAll loads the credential, the shipped workflows unchanged and the
// test-only workflows into n8n's database, then activates them.
func (s *suite) importAll(community []string) error {
	dir := filepath.Join(s.work, "import")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	creds := []map[string]any{{
		"id": credentialID, "name": credentialName, "type": "httpBearerAuth",
		"data": map[string]any{"token": guardToken},
	}}
	b, _ := json.Marshal(creds)
	credFile := filepath.Join(s.work, "credentials.json")
	if err := os.WriteFile(credFile, b, 0o600); err != nil {
		return err
	}
	if err := s.n8n.CLI("import:credentials", "--input="+credFile); err != nil {
		return err
	}
	if len(community) > 0 {
		if err := s.importCommunityCredentials(); err != nil {
			return err
		}
	}
	var files []string
	for _, pattern := range []string{"workflows/*.json", "e2e/testdata/*.json"} {
		m, err := filepath.Glob(filepath.Join(s.repo, pattern))
		if err != nil {
			return err
		}
		files = append(files, m...)
	}
	files = append(files, community...)
	tw, err := templatesWorkflow(s.repo)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "e2e-templates.json"), tw, 0o644); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	if err := s.n8n.CLI("import:workflow", "--separate", "--input="+dir); err != nil {
		return err
	}
	ids := activated
	if len(community) > 0 {
		ids = append(ids, communityWorkflowID)
	}
	for _, id := range ids {
		if err := s.n8n.CLI("update:workflow", "--id="+id, "--active=true"); err != nil {
			return err
		}
	}
	return nil
}

// reply is what a webhook sender got back.
type reply struct {
	Status int
	Header http.Header
	Code   string `json:"code"`
	Key    string `json:"key"`
	Ref    string `json:"result_ref"`
	Msg    string `json:"message"`
	Raw    string
}

func (r reply) String() string { return fmt.Sprintf("HTTP %d %s", r.Status, r.Raw) }

// send posts one event to a production webhook of n8n.
func (s *suite) send(t *testing.T, path string, body any) reply {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := s.web.Post(s.n8n.URL()+"/webhook/"+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST /webhook/%s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: strings.TrimSpace(string(raw))}
	_ = json.Unmarshal(raw, &r)
	return r
}

func (s *suite) lookup(t *testing.T, namespace, key string) record {
	t.Helper()
	rec, err := s.guard.Lookup(namespace, key)
	if err != nil {
		t.Fatalf("lookup %s/%s: %v", namespace, key, err)
	}
	return rec
}

// expect fails the test unless the sender got this status and code.
func expect(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.Status != status || r.Code != code {
		t.Fatalf("answer %s, want HTTP %d code %q", r, status, code)
	}
}

func lead(eventID, email string) map[string]any {
	m := map[string]any{"email": email, "first_name": "Ada", "last_name": "Lovelace", "company": "Analytical Engines", "source": "website"}
	if eventID != "" {
		m["event_id"] = eventID
	}
	return m
}

func booking(number string) map[string]any {
	return map[string]any{"booking_number": number, "email": "guest@example.org", "name": "Grace", "starts_at": "2026-12-01T10:00:00Z", "service": "Consultation"}
}

// waitSlack waits for a Slack message that contains every one of parts.
func (s *suite) waitSlack(t *testing.T, timeout time.Duration, parts ...string) slackMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	m, err := s.slack.WaitFor(ctx, func(m slackMessage) bool {
		for _, p := range parts {
			if !strings.Contains(m.Channel+" "+m.Text, p) {
				return false
			}
		}
		return true
	})
	if err != nil {
		var got []string
		for _, m := range s.slack.Messages() {
			got = append(got, m.Method+" "+m.Channel+": "+tail(m.Text, 400))
		}
		t.Fatalf("no Slack message with %q within %s; got %d:\n%s", parts, timeout, len(got), strings.Join(got, "\n"))
	}
	return m
}
