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

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// Ids fixed in the shipped workflows and in testdata/.
const (
	credentialID   = workflows.CredentialID
	credentialName = workflows.CredentialName
	errorWorkflow  = workflows.ErrorHandlerID
	guardToken     = "e2e-token-3f9a1c"
)

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
    unreachable_threshold: 1   # its own workflows report it: one refused connection opens it
    owner: U0CRMOWNER
  mail:
    cooldown: 3s
    failure_threshold: 5
    unreachable_threshold: 1   # its own workflows report it: one refused connection opens it
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
	repo    string
	work    string
	install install
	n8n     *n8nInstance
	// guardBin is the n8n-guard binary built from this checkout.
	guardBin string
	guard    *guard
	crm      *target
	mail     *target
	slack    *slacktest.Server
	web      *http.Client

	// noResumeCredential: importAll leaves the resume credential to
	// `n8n-guard n8n setup` (TestParking).
	noResumeCredential bool

	// communityReady: n8n-nodes/dist was loaded and a workflow using it imported.
	communityReady string // empty when ready, else why not

	// n8nPort is n8n main's port, chosen before the guards start: their
	// resume origins name it (resumeEnv).
	n8nPort int
}

// resumeEnv tells a guard where n8n is, so it accepts the resume URLs
// n8n makes (http://localhost:<port>/webhook-waiting/…, n8n's default
// webhook base) and calls only those.
func (s *suite) resumeEnv() string {
	return fmt.Sprintf("N8N_GUARD_RESUME_ORIGINS=http://localhost:%d,http://127.0.0.1:%d", s.n8nPort, s.n8nPort)
}

// newSuite installs (once) the n8n that N8N_GUARD_N8N_VERSION names, builds
// the guard and starts it with the fakes. n8n is not started yet: see
// startN8N.
// newBareSuite is what every suite has before its guards: the n8n install
// (once), the guard binary, the fake CRM, mail and Slack, and a fresh work
// folder. webTimeout bounds the test's own calls to n8n's webhooks.
func newBareSuite(t *testing.T, webTimeout time.Duration, mode string) *suite {
	t.Helper()
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	rel := selectedRelease(t)
	s := &suite{repo: repo, web: &http.Client{Timeout: webTimeout}}
	if s.n8nPort, err = freePort(); err != nil {
		t.Fatal(err)
	}
	s.work = filepath.Join(repo, "e2e", ".work", rel.version, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.RemoveAll(s.work); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("n8n %s%s; logs and data of this run: %s", rel.version, mode, s.work)

	s.install = ensureN8N(t, rel)
	if s.guardBin, err = buildGuard(repo, s.work); err != nil {
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
	s.slack = slacktest.New(t)
	t.Cleanup(func() { // what was posted, for reading after a run
		b, _ := json.MarshalIndent(s.slack.Messages(), "", "  ")
		_ = os.WriteFile(filepath.Join(s.work, "slack.json"), b, 0o644)
	})
	return s
}

func newSuite(t *testing.T, guardCfg string) *suite {
	t.Helper()
	s := newBareSuite(t, 90*time.Second, "")
	var err error

	if s.guard, err = startGuard(s.guardBin, s.work, guardCfg, guardToken, s.slack.APIURL(), s.resumeEnv()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.guard.Stop)
	return s
}

// startN8N creates the instance with the guard's credential and the given
// workflows imported (n8n's CLI, before start; none: a fresh instance), activates those named, starts
// n8n and waits until the webhook paths answer. Tests that need a different
// stack (a proxy between n8n and the guard, other workflows) call it with
// their own files.
func (s *suite) startN8N(t *testing.T, env map[string]string, files map[string][]byte, activate, paths []string, community bool) {
	t.Helper()
	var err error
	withPort := map[string]string{"N8N_PORT": fmt.Sprint(s.n8nPort)}
	for k, v := range env {
		withPort[k] = v
	}
	s.n8n, err = newN8N(s.install, filepath.Join(s.work, "n8n"), withPort)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.n8n.Stop)
	if len(files) > 0 {
		if err := s.importAll(files, community); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range activate {
		if err := s.n8n.Activate(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.n8n.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := s.n8n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		if err := s.n8n.WaitForWebhook(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// setup is the stack of TestWorkflows: the shipped workflows as a user
// imports them (only the values of their Config nodes set to this run's
// addresses), the templates pasted into a workflow, the test workflows.
func setup(t *testing.T) *suite {
	t.Helper()
	s := newSuite(t, guardConfig)
	files, err := s.shippedFiles(s.guard.URL())
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	community := s.communityNode(env, files)
	activate := []string{"n8nGuardLeadCrm1", "n8nGuardBooking1", "n8nGuardE2eThrow", "n8nGuardE2eDedup", templatesWorkflowID}
	if s.install.Major() >= 2 {
		// 2.x runs an error workflow only when it is published; 1.x runs
		// it inactive (and cannot activate a workflow without a trigger).
		activate = append(activate, errorWorkflow)
	}
	paths := []string{leadPath, bookingPath, throwPath, dedupePath, templatesPath}
	if community {
		activate = append(activate, communityWorkflowID)
		paths = append(paths, communityPath)
	}
	s.startN8N(t, env, files, activate, paths, community)
	return s
}

// shippedFiles are the workflow files of TestWorkflows by file name: the
// shipped ones with their Config values set to this run's addresses, the
// test workflows with {{CRM_URL}} filled in, the templates workflow.
func (s *suite) shippedFiles(guardURL string) (map[string][]byte, error) {
	files := map[string][]byte{}
	shipped, err := filepath.Glob(filepath.Join(s.repo, "workflows", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range shipped {
		b, err := configure(f, map[string]any{
			workflows.GuardURL: guardURL, "crm_base_url": s.crm.URL(), "mail_api_url": s.mail.URL(),
			// Short timeouts keep the timeout cases short.
			"crm_timeout_ms": 3000, "mail_timeout_ms": 3000,
		})
		if err != nil {
			return nil, err
		}
		files["shipped-"+filepath.Base(f)] = b
	}
	testdata, err := filepath.Glob(filepath.Join(s.repo, "e2e", "testdata", "*.json"))
	if err != nil {
		return nil, err
	}
	for _, f := range testdata {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		files[filepath.Base(f)] = s.fill(b)
	}
	tw, err := templatesWorkflow(guardURL)
	if err != nil {
		return nil, err
	}
	files["e2e-templates.json"] = tw
	return files, nil
}

// configure reads a shipped workflow file as it is and sets the values of
// its Config node, the one place a user edits; every other member stays.
func configure(path string, values map[string]any) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var wf map[string]any
	if err := json.Unmarshal(b, &wf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	raw, _ := json.Marshal(wf["nodes"])
	var nodes []map[string]any
	if err := json.Unmarshal(raw, &nodes); err != nil {
		return nil, fmt.Errorf("%s: nodes: %w", path, err)
	}
	for name, v := range values {
		workflows.SetConfig(nodes, name, v)
	}
	wf["nodes"] = nodes
	return json.Marshal(wf)
}

// fill puts this run's addresses into a test workflow.
func (s *suite) fill(b []byte) []byte {
	return []byte(strings.NewReplacer("{{CRM_URL}}", s.crm.URL(), "{{GUARD_URL}}", s.guard.URL()).Replace(string(b)))
}

// importAll loads the guard's credential (Header Auth) and the workflow
// files into n8n's database.
func (s *suite) importAll(files map[string][]byte, community bool) error {
	dir := filepath.Join(s.work, "import")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	creds := []map[string]any{{
		"id": credentialID, "name": credentialName, "type": workflows.CredentialType,
		"data": map[string]any{"name": "Authorization", "value": "Bearer " + guardToken},
	}}
	// The Wait nodes' credential holds the secret the guard made on its
	// first start, as `n8n-guard n8n setup` would write it. (A suite whose
	// guard has none yet parks nothing.)
	if secret, err := s.resumeSecret(); err == nil && !s.noResumeCredential {
		creds = append(creds, map[string]any{
			"id": workflows.ResumeCredentialID, "name": workflows.ResumeCredentialName, "type": workflows.CredentialType,
			"data": map[string]any{"name": workflows.ResumeHeader, "value": secret},
		})
	}
	// The checks' webhooks check a secret of their own, the check secret
	// the guard made on its first start (never the resume secret).
	if s.guard != nil {
		if secret, err := s.guard.CheckSecret(); err == nil && secret != "" {
			creds = append(creds, map[string]any{
				"id": workflows.CheckCredentialID, "name": workflows.CheckCredentialName, "type": workflows.CredentialType,
				"data": map[string]any{"name": workflows.CheckHeader, "value": secret},
			})
		}
	}
	b, _ := json.Marshal(creds)
	credFile := filepath.Join(s.work, "credentials.json")
	if err := os.WriteFile(credFile, b, 0o600); err != nil {
		return err
	}
	if err := s.n8n.CLI("import:credentials", "--input="+credFile); err != nil {
		return err
	}
	if community {
		if err := s.importCommunityCredentials(); err != nil {
			return err
		}
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return s.n8n.CLI("import:workflow", "--separate", "--input="+dir)
}

// resumeSecret is the resume secret of the suite's guard.
func (s *suite) resumeSecret() (string, error) {
	if s.guard == nil {
		return "", fmt.Errorf("no guard")
	}
	secret, err := s.guard.ResumeSecret()
	if err == nil && secret == "" {
		err = fmt.Errorf("empty resume secret")
	}
	return secret, err
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
func (s *suite) waitSlack(t *testing.T, timeout time.Duration, parts ...string) slacktest.Call {
	t.Helper()
	var found slacktest.Call
	if !testwait.Poll(timeout, func() bool {
		for _, m := range s.slack.Messages() {
			if containsAll(m.Channel+" "+m.Content(), parts) {
				found = m
				return true
			}
		}
		return false
	}) {
		var got []string
		for _, m := range s.slack.Messages() {
			got = append(got, m.Method+" "+m.Channel+": "+tail(m.Content(), 400))
		}
		t.Fatalf("no Slack message with %q within %s; got %d:\n%s", parts, timeout, len(got), strings.Join(got, "\n"))
	}
	return found
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
