package main

import (
	"bytes"
	"crypto/sha256"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The contract's "Configuration file" example, verbatim.
const contractYAML = `
namespaces:
  booking-confirmations:
    lease: 120s                 # default lease when reserve sends none
    retention: 720h             # how long finished records are kept
    on_lease_expiry: unknown    # or: reclaim
    owner: U0OFFICE             # who hears about keys that go unknown
    runbook: "Check the mail provider's delivery log for the booking number."
destinations:
  hubspot:
    cooldown: 5m                # how long an open breaker stays open
    failure_threshold: 5        # consecutive failures that open it
    owner: U0CRM
notify:
  default_channel: C0ALERTS
  default_owner: U0ONCALL
  group_window: 5m
owners:                         # first match wins
  - workflow: "orders-*"        # workflow name or id, glob
    owner: U0ORDERS             # U… user, S… user group, or an e-mail
    channel: C0ORDERS
    runbook: "Check the CRM for the order, then re-run the execution."
    deadline: 4h
`

func TestParseContractExample(t *testing.T) {
	fc, err := ParseFile(strings.NewReader(contractYAML))
	if err != nil {
		t.Fatal(err)
	}
	p, err := fc.Policies()
	if err != nil {
		t.Fatal(err)
	}
	want := keystore.NamespacePolicy{Lease: 120 * time.Second, Retention: 720 * time.Hour, OnLeaseExpiry: keystore.ExpireToUnknown,
		Owner: "U0OFFICE", Runbook: "Check the mail provider's delivery log for the booking number."}
	if got := p.Namespaces["booking-confirmations"]; got != want {
		t.Fatalf("namespace policy = %+v, want %+v", got, want)
	}
	if got := p.Destinations["hubspot"]; !reflect.DeepEqual(got, keystore.DestinationPolicy{Cooldown: 5 * time.Minute, FailureThreshold: 5, Owner: "U0CRM"}) {
		t.Fatalf("destination policy = %+v", got)
	}
	n := fc.NotifyConfig()
	if n.DefaultChannel != "C0ALERTS" || n.DefaultOwner != "U0ONCALL" || n.GroupWindow != 5*time.Minute {
		t.Fatalf("notify = %+v", n)
	}
	if len(n.Owners) != 1 || n.Owners[0].Workflow != "orders-*" || n.Owners[0].Deadline != 4*time.Hour || n.Owners[0].Channel != "C0ORDERS" {
		t.Fatalf("owners = %+v", n.Owners)
	}
	if n.Namespaces["booking-confirmations"].Owner != "U0OFFICE" || n.Destinations["hubspot"].Owner != "U0CRM" {
		t.Fatalf("routes = %+v %+v", n.Namespaces, n.Destinations)
	}
}

// A destination's thresholds and the namespaces that may use it.
func TestDestinationThresholdsAndNamespacesConfig(t *testing.T) {
	fc, err := ParseFile(strings.NewReader("destinations:\n  shared-pay:\n    failure_threshold: 4\n    unreachable_threshold: 1\n    namespaces: [payments, refunds]\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := fc.Policies()
	if err != nil {
		t.Fatal(err)
	}
	want := keystore.DestinationPolicy{FailureThreshold: 4, UnreachableThreshold: 1, Namespaces: []string{"payments", "refunds"}}
	if got := p.Destinations["shared-pay"]; !reflect.DeepEqual(got, want) {
		t.Fatalf("destination policy = %+v, want %+v", got, want)
	}
}

func TestParseFileErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown top-level key", "namespace:\n  a: {}\n", "namespace"},
		{"unknown namespace key", "namespaces:\n  a:\n    leese: 10s\n", "leese"},
		{"duration without unit", "namespaces:\n  a:\n    lease: 120\n", "not a duration"},
		{"duration garbage", "destinations:\n  a:\n    cooldown: soon\n", "not a duration"},
		{"lease over a day", "namespaces:\n  a:\n    lease: 25h\n", "between 1s and 24h"},
		{"lease fraction of a second", "namespaces:\n  a:\n    lease: 1500ms\n", "whole seconds"},
		{"on_lease_expiry unknown value", "namespaces:\n  a:\n    on_lease_expiry: retry\n", "on_lease_expiry"},
		{"namespace name invalid", "namespaces:\n  Bookings:\n    lease: 10s\n", "namespaces.Bookings"},
		{"failure_threshold 0", "destinations:\n  hubspot:\n    failure_threshold: 0\n", "at least 1"},
		{"failure_threshold a string", "destinations:\n  hubspot:\n    failure_threshold: five\n", "line 3"},
		{"unreachable_threshold 0", "destinations:\n  hubspot:\n    unreachable_threshold: 0\n", "destinations.hubspot.unreachable_threshold: 0 must be 1-5"},
		{"unreachable_threshold above failure_threshold", "destinations:\n  hubspot:\n    failure_threshold: 3\n    unreachable_threshold: 4\n", "at most failure_threshold"},
		{"destination namespaces empty", "destinations:\n  hubspot:\n    namespaces: []\n", "leave it out to admit every namespace"},
		{"destination namespace invalid", "destinations:\n  hubspot:\n    namespaces: [Payments]\n", "destinations.hubspot.namespaces[0]"},
		{"destination namespace twice", "destinations:\n  hubspot:\n    namespaces: [payments, payments]\n", "listed twice"},
		{"owners not a list", "owners:\n  workflow: x\n", "line 2"},
		{"not YAML", "namespaces: [\n", "yaml"},
		{"negative group window", "notify:\n  group_window: -5m\n", "notify.group_window"},
		{"max attempts is gone", "notify:\n  max_attempts: 10\n", "notify.max_attempts is gone"},
		{"negative retry_for", "notify:\n  retry_for: -3h\n", "notify.retry_for"},
		{"public_url not absolute", "public_url: guard.example.org\n", "public_url \"guard.example.org\" must be the absolute http(s) address"},
		{"public_url not http", "public_url: ftp://guard.example.org\n", "public_url"},
		{"public_url with a query", "public_url: https://guard.example.org/?token=x\n", "public_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile(strings.NewReader(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error mentioning %q, got %v", tc.want, err)
			}
		})
	}
	t.Run("empty file is the embedded default", func(t *testing.T) {
		if _, err := ParseFile(strings.NewReader("# nothing\n")); err != nil {
			t.Fatal(err)
		}
	})
}

func TestScopedTokensConfig(t *testing.T) {
	const yml = `
tokens:
  team-crm:
    env: TEAM_CRM_TOKEN
    role: reserve
    namespaces: [crm-contacts]
  dashboard:
    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    role: read
    person: ana@example.com
metrics:
  label_limit: 20
`
	fc, err := ParseFile(strings.NewReader(yml))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := fc.ScopedTokens(func(k string) string { return map[string]string{"TEAM_CRM_TOKEN": " secret "}[k] })
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "dashboard" || ts[0].Role != access.RoleRead || ts[0].SHA256 != sha256.Sum256([]byte("test")) ||
		ts[0].Person != "ana@example.com" || ts[1].Person != "" ||
		ts[1].Name != "team-crm" || ts[1].Role != access.RoleReserve || ts[1].SHA256 != sha256.Sum256([]byte("secret")) ||
		len(ts[1].Namespaces) != 1 || ts[1].Namespaces[0] != "crm-contacts" {
		t.Fatalf("tokens = %+v", ts)
	}
	if fc.Metrics.LabelLimit != 20 {
		t.Fatalf("label limit %d", fc.Metrics.LabelLimit)
	}
	if _, err := fc.ScopedTokens(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "TEAM_CRM_TOKEN is not set") {
		t.Fatalf("unset variable: %v", err)
	}
	for name, bad := range map[string]string{
		"no role":          "tokens:\n  a:\n    env: X\n",
		"unknown role":     "tokens:\n  a:\n    env: X\n    role: owner\n",
		"both sources":     "tokens:\n  a:\n    env: X\n    sha256: " + strings.Repeat("ab", 32) + "\n    role: read\n",
		"no source":        "tokens:\n  a:\n    role: read\n",
		"short hash":       "tokens:\n  a:\n    sha256: abcd\n    role: read\n",
		"bad namespace":    "tokens:\n  a:\n    env: X\n    role: read\n    namespaces: [Not OK]\n",
		"bad name":         "tokens:\n  A B:\n    env: X\n    role: read\n",
		"value in file":    "tokens:\n  a:\n    token: abc\n    role: read\n",
		"negative limit":   "metrics:\n  label_limit: -1\n",
		"person too long":  "tokens:\n  a:\n    env: X\n    role: decide\n    person: " + strings.Repeat("p", 120) + "\n",
		"person two lines": "tokens:\n  a:\n    env: X\n    role: decide\n    person: \"ana\\nbob\"\n",
		"unknown metrics:": "metrics:\n  labels: 3\n",
	} {
		if _, err := ParseFile(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// resolvers: and escalation: (docs/notify.md) reach the notify config.
func TestParseDeciders(t *testing.T) {
	fc, err := ParseFile(strings.NewReader(`
namespaces:
  bookings:
    owner: U0OFFICE
    resolvers: [U0HELPER, S0OPS]
    escalation:
      - { after: 30m, to: U0LEAD }
      - { after: 2h, to: C0INCIDENTS }
owners:
  - workflow: "orders-*"
    owner: U0ORDERS
    escalation:
      - { after: 1h, to: S0OPS }
notify:
  retry_for: 72h
`))
	if err != nil {
		t.Fatal(err)
	}
	n := fc.NotifyConfig()
	ns := n.Namespaces["bookings"]
	if len(ns.Resolvers) != 2 || ns.Resolvers[1] != "S0OPS" || len(ns.Escalation) != 2 ||
		ns.Escalation[1].After != 2*time.Hour || ns.Escalation[1].To != "C0INCIDENTS" {
		t.Fatalf("namespace deciders = %+v", ns.Deciders)
	}
	if o := n.Owners[0]; len(o.Escalation) != 1 || o.Escalation[0].To != "S0OPS" || o.Escalation[0].After != time.Hour {
		t.Fatalf("owner rule deciders = %+v", o.Deciders)
	}
	if n.RetryFor != 72*time.Hour {
		t.Fatalf("retry_for = %s", n.RetryFor)
	}
}

func TestParseApproval(t *testing.T) {
	fc, err := ParseFile(strings.NewReader("namespaces:\n  invoices:\n    approval: required\n    approvers: [U0CTRL, S0FINANCE]\n  quotes:\n    approval: required\n    approvers: [U0CTRL]\n    four_eyes: false\n  crm: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := fc.Policies()
	if err != nil {
		t.Fatal(err)
	}
	inv, quo, crm := p.Namespace("invoices").Approval, p.Namespace("quotes").Approval, p.Namespace("crm").Approval
	if !inv.Required || !inv.FourEyes {
		t.Errorf("invoices: %+v, want required, four eyes by default, two approvers", inv)
	}
	if !quo.Required || quo.FourEyes {
		t.Errorf("quotes: %+v, want required without four eyes", quo)
	}
	if crm.Required {
		t.Errorf("crm: %+v, want no approval", crm)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"approval unknown value", "namespaces:\n  a:\n    approval: maybe\n    approvers: [U0A]\n", "approval"},
		{"approval without approvers", "namespaces:\n  a:\n    approval: required\n", "approvers"},
		{"approver not a Slack ID", "namespaces:\n  a:\n    approval: required\n    approvers: [ann@example.com]\n", "approvers[0]"},
		{"approvers without approval", "namespaces:\n  a:\n    approvers: [U0A]\n", "need approval: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc, err := ParseFile(strings.NewReader(tc.yaml))
			if err == nil {
				_, err = fc.Policies()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error mentioning %q, got %v", tc.want, err)
			}
		})
	}
}

// people: names each person's identities once; four eyes (the store's
// policies) knows them as one person, whatever the spelling.
func TestPeopleConfig(t *testing.T) {
	fc, err := ParseFile(strings.NewReader(`
people:
  ana:
    emails: [ana@example.com]
    slack: [U0ANA]
    oidc_subjects: ["248289761001"]
    names: [Ana Lopez]
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := fc.Policies()
	if err != nil {
		t.Fatal(err)
	}
	// Four eyes without people: compares spellings only, and the start says so.
	for _, tc := range []struct {
		people string
		warned bool
	}{{"", true}, {"people:\n  ana:\n    slack: [U0ANA]\n", false}} {
		fc, err := ParseFile(strings.NewReader("namespaces:\n  invoices:\n    approval: required\n    approvers: [U0CTRL]\n" + tc.people))
		if err != nil {
			t.Fatal(err)
		}
		p, err := fc.Policies()
		if err != nil {
			t.Fatal(err)
		}
		var logged bytes.Buffer
		logFourEyes(slog.New(slog.NewTextHandler(&logged, nil)), p)
		if got := strings.Contains(logged.String(), "four eyes compares spellings only") && strings.Contains(logged.String(), "invoices"); got != tc.warned {
			t.Errorf("people %q: warned %v, want %v: %s", tc.people, got, tc.warned, logged.String())
		}
	}
	// four_eyes.fold_plus_tags: true by default; false keeps a tag another
	// address.
	for _, tc := range []struct {
		section string
		folded  bool
	}{{"", true}, {"four_eyes:\n  fold_plus_tags: true\n", true}, {"four_eyes:\n  fold_plus_tags: false\n", false}} {
		fc, err := ParseFile(strings.NewReader("people:\n  ana:\n    emails: [ana@example.com]\n" + tc.section))
		if err != nil {
			t.Fatal(err)
		}
		p, err := fc.Policies()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.People.Person("ana+x@example.com"); ok != tc.folded {
			t.Errorf("%q: ana+x@example.com is ana: %v, want %v", tc.section, ok, tc.folded)
		}
	}
	for _, id := range []string{"ana", "ANA@example.com", "U0ANA", "248289761001", "ana lopez", "Ana Lopez <ana@example.com>", "mailto:ana@example.com"} {
		if who, ok := p.People.Person(id); !ok || who != "ana" {
			t.Errorf("%q names %q, %v; want ana", id, who, ok)
		}
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"a Slack ID that is none", "people:\n  ana:\n    slack: [ana]\n", "people.ana.slack[0]"},
		{"an e-mail that is none", "people:\n  ana:\n    emails: [ana]\n", "people.ana.emails[0]"},
		{"one identity for two", "people:\n  ana:\n    slack: [U0ANA]\n  bob:\n    slack: [U0ANA]\n", "also an identity of ana"},
		{"an invisible character", "people:\n  ana:\n    emails: [\"ana\\u200b@example.com\"]\n", "invisible character"},
		{"mixed scripts", "people:\n  ana:\n    names: [\"\\u0430na\"]\n", "scripts"},
		{"an unknown key", "people:\n  ana:\n    email: [ana@example.com]\n", "email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseFile(strings.NewReader(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error mentioning %q, got %v", tc.want, err)
			}
		})
	}
}

// public_url reaches notify, which links every Slack message to the console.
func TestPublicURLConfig(t *testing.T) {
	fc, err := ParseFile(strings.NewReader("public_url: https://guard.example.org/\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fc.NotifyConfig().PublicURL; got != "https://guard.example.org/" {
		t.Fatalf("notify's public URL: %q", got)
	}
}

// Where resume calls may go: N8N_GUARD_RESUME_ORIGINS replaces the file's
// n8n.resume_origins, which replace the default of N8N_URL's and
// N8N_API_URL's origins; nothing configured leaves parking off.
func TestResumeOriginsConfig(t *testing.T) {
	fc, err := ParseFile(strings.NewReader("n8n:\n  resume_origins: [https://n8n.example.org]\n  resume_path: webhook-wait\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		cfg            Config
		allow, refused string
	}{
		"the file":                {Config{File: fc, N8nURL: "http://other:5678"}, "https://n8n.example.org/webhook-wait/1", "http://other:5678/webhook-wait/1"},
		"the variable":            {Config{File: fc, ResumeOrigins: []string{"http://n8n:5678"}}, "http://n8n:5678/webhook-wait/1", "https://n8n.example.org/webhook-wait/1"},
		"N8N_URL and the API's":   {Config{N8nURL: "https://n8n.example.org", N8nAPIURL: "http://n8n:5678/api/v1"}, "http://n8n:5678/webhook-waiting/1", "http://evil:5678/webhook-waiting/1"},
		"N8N_URL's own":           {Config{N8nURL: "https://n8n.example.org/"}, "https://n8n.example.org/webhook-waiting/1", "https://n8n.example.org/webhook/1"},
		"the variable's path":     {Config{N8nURL: "http://n8n:5678", ResumePath: "/wait/"}, "http://n8n:5678/wait/1", "http://n8n:5678/webhook-waiting/1"},
		"nothing: parking is off": {Config{}, "", "http://localhost:5678/webhook-waiting/1"},
	} {
		tg, err := c.cfg.resumeTargets()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c.allow != "" && tg.Check(c.allow) != nil {
			t.Errorf("%s: %s refused: %v", name, c.allow, tg.Check(c.allow))
		}
		if tg.Check(c.refused) == nil {
			t.Errorf("%s: %s allowed", name, c.refused)
		}
	}
	bad, err := ParseFile(strings.NewReader("n8n:\n  resume_origins: [n8n.example.org]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (Config{File: bad}).resumeTargets(); err == nil || !strings.Contains(err.Error(), "n8n.resume_origins") {
		t.Fatalf("an origin without a scheme: %v", err)
	}
}

// n8n's public webhook address (N8N_WEBHOOK_URL, else n8n.webhook_url):
// its resume URLs are accepted and called at N8N_API_URL's instance (else
// N8N_URL) with the same path; the private origin stays accepted; a malformed
// value stops the start with a message naming the setting.
func TestN8nWebhookURLConfig(t *testing.T) {
	fc, err := ParseFile(strings.NewReader("n8n:\n  webhook_url: https://file.example.org/\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		cfg        Config
		raw, call  string
		alsoCalled string // another resume URL accepted as it is
	}{
		"the variable":               {Config{N8nWebhookURL: "https://n8n.example.org", N8nURL: "http://n8n:5678"}, "https://n8n.example.org/webhook-waiting/1", "http://n8n:5678/webhook-waiting/1", "http://n8n:5678/webhook-waiting/2"},
		"the file":                   {Config{File: fc, N8nURL: "http://n8n:5678/"}, "https://file.example.org/webhook-waiting/1", "http://n8n:5678/webhook-waiting/1", "http://n8n:5678/webhook-waiting/2"},
		"the variable first":         {Config{File: fc, N8nWebhookURL: "https://n8n.example.org", N8nURL: "http://n8n:5678"}, "https://n8n.example.org/webhook-waiting/1", "http://n8n:5678/webhook-waiting/1", ""},
		"the API's instance":         {Config{N8nWebhookURL: "https://n8n.example.org", N8nAPIURL: "http://n8n:5678/api/v1"}, "https://n8n.example.org/webhook-waiting/1", "http://n8n:5678/webhook-waiting/1", ""},
		"people's N8N_URL is public": {Config{N8nWebhookURL: "https://n8n.example.org", N8nURL: "https://n8n.example.org", N8nAPIURL: "http://n8n:5678"}, "https://n8n.example.org/webhook-waiting/1", "http://n8n:5678/webhook-waiting/1", ""},
		"no private address":         {Config{N8nWebhookURL: "https://n8n.example.org"}, "https://n8n.example.org/webhook-waiting/1", "https://n8n.example.org/webhook-waiting/1", ""},
	} {
		tg, err := c.cfg.resumeTargets()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, why := tg.Call(c.raw); got != c.call {
			t.Errorf("%s: %s called at %q (%s), want %s", name, c.raw, got, why, c.call)
		}
		if c.alsoCalled != "" {
			if got, why := tg.Call(c.alsoCalled); got != c.alsoCalled {
				t.Errorf("%s: %s called at %q (%s)", name, c.alsoCalled, got, why)
			}
		}
	}
	if tg, _ := (Config{File: fc, N8nWebhookURL: "https://n8n.example.org", N8nURL: "http://n8n:5678"}).resumeTargets(); tg.Check("https://file.example.org/webhook-waiting/1") == nil {
		t.Error("the file's webhook_url is accepted beside N8N_WEBHOOK_URL, which replaces it")
	}
	for _, bad := range []Config{
		{N8nWebhookURL: "n8n.example.org", N8nURL: "http://n8n:5678"},
		{N8nWebhookURL: "https://n8n.example.org", N8nURL: "http://n8n:5678/other"},
	} {
		_, err := bad.resumeTargets()
		if err == nil || !strings.Contains(err.Error(), "N8N_WEBHOOK_URL / n8n.webhook_url") {
			t.Errorf("%+v: %v, want an error naming N8N_WEBHOOK_URL", bad, err)
		}
	}
	var c Config
	if err := c.applyEnvAndFile(func(k string) string {
		return map[string]string{"N8N_WEBHOOK_URL": "https://n8n.example.org", "N8N_URL": "http://n8n:5678"}[k]
	}); err != nil {
		t.Fatal(err)
	}
	if c.N8nWebhookURL != "https://n8n.example.org" {
		t.Fatalf("N8N_WEBHOOK_URL read as %q", c.N8nWebhookURL)
	}
}
