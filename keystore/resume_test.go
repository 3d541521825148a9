package keystore_test

import (
	"errors"
	"testing"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A resume URL is allowed only at a configured n8n's waiting-webhook path;
// each refusal names the rule that says why.
func TestResumeTargetsAllowOnlyConfiguredN8n(t *testing.T) {
	tg, err := keystore.NewResumeTargets([]string{"https://N8N.example.org", "http://n8n:5678/", "https://example.com/n8n"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for u, rule := range map[string]string{
		"https://n8n.example.org/webhook-waiting/12?signature=abc": "",
		"https://n8n.example.org:443/webhook-waiting/12":           "",
		"http://n8n:5678/webhook-waiting/7":                        "",
		"https://example.com/n8n/webhook-waiting/7":                "",
		"http://n8n.example.org/webhook-waiting/12":                "resume_origin", // http, not https
		"https://n8n.example.org:8443/webhook-waiting/12":          "resume_origin",
		"https://evil.example/webhook-waiting/12":                  "resume_origin",
		"https://n8n.example.org.evil.example/webhook-waiting/1":   "resume_origin",
		"https://user@n8n.example.org/webhook-waiting/12":          "resume_origin",
		"http://n8n:5678/webhook/steal":                            "resume_path",
		"http://n8n:5678/webhook-waiting/":                         "resume_path",
		"http://n8n:5678/webhook-waiting/%2e%2e/rest/login":        "resume_path",
		"http://n8n:5678/webhook-waiting/../rest/login":            "resume_path",
		"https://example.com/webhook-waiting/7":                    "resume_path", // the base /n8n is missing
		"ftp://n8n:5678/webhook-waiting/1":                         "http_url",
	} {
		err := tg.Check(u)
		var e *errs.Error
		switch {
		case rule == "" && err != nil:
			t.Errorf("%s: refused (%v), want allowed", u, err)
		case rule != "" && (!errors.As(err, &e) || e.Code != errs.InvalidRequest || len(e.Fields) != 1 || e.Fields[0] != (errs.FieldError{Field: "resume_url", Rule: rule})):
			t.Errorf("%s: %v, want invalid_request on resume_url, rule %s", u, err, rule)
		}
	}
	var none keystore.ResumeTargets
	var e *errs.Error
	if err := none.Check("http://n8n:5678/webhook-waiting/7"); !errors.As(err, &e) || e.Fields[0].Rule != "resume_unconfigured" {
		t.Fatalf("without targets: %v, want resume_unconfigured", err)
	}
	if none.Check("") != nil || tg.Check("") != nil {
		t.Fatal("an empty resume URL (nothing to call) is refused")
	}
	custom, err := keystore.NewResumeTargets([]string{"http://n8n:5678"}, "webhook-wait")
	if err != nil {
		t.Fatal(err)
	}
	if custom.Check("http://n8n:5678/webhook-wait/1") != nil || custom.Check("http://n8n:5678/webhook-waiting/1") == nil {
		t.Fatal("the configured waiting-webhook path is not the one checked")
	}
	for _, bad := range []string{"n8n:5678", "ftp://n8n", "http://"} {
		if _, err := keystore.NewResumeTargets([]string{bad}, ""); err == nil {
			t.Errorf("origin %q accepted", bad)
		}
	}
}

// A resume URL wakes the execution whose id is in its path, after the
// waiting-webhook path of its n8n (a base path and a Wait node's suffix
// around it); it is accepted only from that execution.
func TestAResumeURLIsOnlyItsOwnExecutions(t *testing.T) {
	tg, err := keystore.NewResumeTargets([]string{"https://n8n.example.org", "https://example.com/n8n"}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, url  string
		executions []string
		ok         bool
	}{
		{"its own", "https://n8n.example.org/webhook-waiting/41", []string{"41"}, true},
		{"its own, signed (2.x)", "https://n8n.example.org/webhook-waiting/41?signature=abc", []string{"41", "41"}, true},
		{"its own, under a base path, with a suffix", "https://example.com/n8n/webhook-waiting/41/after", []string{"41"}, true},
		{"one of the two names it, the other is empty", "https://n8n.example.org/webhook-waiting/41", []string{"", "41"}, true},
		{"another's", "https://n8n.example.org/webhook-waiting/421", []string{"41"}, false},
		{"another's, signed (2.x)", "https://n8n.example.org/webhook-waiting/421?signature=abc", []string{"41"}, false},
		{"the names disagree", "https://n8n.example.org/webhook-waiting/41", []string{"41", "42"}, false},
		{"a prefix of the id", "https://n8n.example.org/webhook-waiting/411", []string{"41"}, false},
		{"an encoded slash", "https://n8n.example.org/webhook-waiting/41%2F421", []string{"41"}, false},
		{"no execution named", "https://n8n.example.org/webhook-waiting/41", nil, false},
	} {
		err := tg.CheckExecution(c.url, c.executions...)
		var e *errs.Error
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: refused (%v)", c.name, err)
		case !c.ok && (!errors.As(err, &e) || e.Code != errs.InvalidRequest || len(e.Fields) != 1 || e.Fields[0] != (errs.FieldError{Field: "resume_url", Rule: "resume_execution"})):
			t.Errorf("%s: %v, want invalid_request resume_url resume_execution", c.name, err)
		}
	}
	for id, want := range map[string]string{"41:node:0:0": "41", " 41 :x": "41", "41": "", "": "", ":x": ""} {
		if got := keystore.RequestExecution(id); got != want {
			t.Errorf("RequestExecution(%q) = %q, want %q", id, got, want)
		}
	}
	for owner, want := range map[string]string{"n8n wf7 exec 41": "41", "n8n execution 43": "43", "n8n exec 4711": "4711", "crm team": "", "n8n wf exec": ""} {
		if _, got := keystore.ExecutionOf(owner); got != want {
			t.Errorf("ExecutionOf(%q) = %q, want %q", owner, got, want)
		}
	}
}

// n8n's WEBHOOK_URL is public, the guard reaches n8n privately: resume
// URLs of the public origin are checked as any (every refusal above still
// holds for it) and called at the private address with the same path and
// query; the private origin stays accepted, called as it is.
func TestResumeTargetsCallAPublicOriginAtItsPrivateAddress(t *testing.T) {
	base, err := keystore.NewResumeTargets([]string{"http://n8n:5678"}, "")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := base.WithPublic("https://N8N.example.org/", "http://n8n:5678")
	if err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]string{
		"https://n8n.example.org/webhook-waiting/12?signature=abc": "http://n8n:5678/webhook-waiting/12?signature=abc",
		"https://n8n.example.org:443/webhook-waiting/12":           "http://n8n:5678/webhook-waiting/12",
		"http://n8n:5678/webhook-waiting/7":                        "http://n8n:5678/webhook-waiting/7", // parked before WEBHOOK_URL changed
		"https://n8n.example.org/webhook-waiting/a%2Fb":            "http://n8n:5678/webhook-waiting/a%2Fb",
	} {
		if got, why := tg.Call(raw); why != "" || got != want {
			t.Errorf("%s: called at %q (%s), want %s", raw, got, why, want)
		}
	}
	for u, rule := range map[string]string{
		"http://n8n.example.org/webhook-waiting/12":                 "resume_origin", // http, not https
		"https://n8n.example.org:8443/webhook-waiting/12":           "resume_origin",
		"https://evil.example/webhook-waiting/12":                   "resume_origin",
		"https://n8n.example.org.evil.example/webhook-waiting/1":    "resume_origin",
		"https://user@n8n.example.org/webhook-waiting/12":           "resume_origin",
		"https://n8n.example.org/webhook/steal":                     "resume_path",
		"https://n8n.example.org/webhook-waiting/":                  "resume_path",
		"https://n8n.example.org/webhook-waiting/%2e%2e/rest/login": "resume_path",
		"https://n8n.example.org/webhook-waiting/../rest/login":     "resume_path",
		"ftp://n8n.example.org/webhook-waiting/1":                   "http_url",
	} {
		var e *errs.Error
		if err := tg.Check(u); !errors.As(err, &e) || e.Fields[0].Rule != rule {
			t.Errorf("%s: %v, want rule %s", u, err, rule)
		}
		if got, why := tg.Call(u); why == "" || got != "" {
			t.Errorf("%s: would be called at %q", u, got)
		}
	}
	// With a path (n8n's N8N_PATH) on both sides, the path is kept.
	sub, err := keystore.ResumeTargets{}.WithPublic("https://example.com/n8n/", "http://n8n:5678/n8n")
	if err != nil {
		t.Fatal(err)
	}
	if got, why := sub.Call("https://example.com/n8n/webhook-waiting/3"); got != "http://n8n:5678/n8n/webhook-waiting/3" {
		t.Errorf("under /n8n: called at %q (%s)", got, why)
	}
	// Without a private address the public one is called itself.
	alone, err := keystore.ResumeTargets{}.WithPublic("https://n8n.example.org", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := alone.Call("https://n8n.example.org/webhook-waiting/3"); got != "https://n8n.example.org/webhook-waiting/3" {
		t.Errorf("without a private address: called at %q", got)
	}
	for _, bad := range [][2]string{
		{"n8n.example.org", "http://n8n:5678"},
		{"https://", "http://n8n:5678"},
		{"https://user:pw@n8n.example.org", "http://n8n:5678"},
		{"https://n8n.example.org/?x=1", "http://n8n:5678"},
		{"https://n8n.example.org", "n8n:5678"},
		{"https://n8n.example.org", "http://n8n:5678/other"}, // the guard does not rewrite paths
	} {
		if _, err := base.WithPublic(bad[0], bad[1]); err == nil {
			t.Errorf("public %q, private %q accepted", bad[0], bad[1])
		}
	}
}
