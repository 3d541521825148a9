package redact

import (
	"strings"
	"testing"
)

func TestRedactPatterns(t *testing.T) {
	cases := []struct{ in, leak string }{
		{"mail to a.b+c@sub.example.co.uk failed", "a.b+c@"},
		{"Authorization: Bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnop"},
		{`{"api_key": "k-123456789"}`, "k-123456789"},
		{"x-api-key=ABCDEF123456", "ABCDEF123456"},
		{"client_secret=shh-its-a-secret", "shh-its"},
		{"https://u:p4ss@host/x", "p4ss"},
		{"github token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abc"},
		{"stripe sk_live_abcdefgh12345678", "sk_live_abc"},
		{"opaque 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 hash", "9f86d081884c7d659a2f"},
	}
	for _, tc := range cases {
		if got := Redact(tc.in); strings.Contains(got, tc.leak) {
			t.Errorf("Redact(%q) = %q leaks %q", tc.in, got, tc.leak)
		}
	}
	if got := Redact("The service was not able to process your request (HTTP 500)"); got != "The service was not able to process your request (HTTP 500)" {
		t.Errorf("harmless text changed: %q", got)
	}
}

// Secrets in shapes the plain patterns miss are hidden too: query
// parameters, non-ASCII and URL-encoded e-mail addresses, short bearer
// tokens, passwords with @.
func TestRedactHidesSecretsOfUnusualShape(t *testing.T) {
	cases := map[string][]string{
		"GET https://api.hubapi.com/contacts?key=s3cr3tKeyValue&email=john%40example.com failed": {"s3cr3tKeyValue", "john"},
		"contact jürgen.müller@example.de exists":                                                {"jürgen", "müller"},
		"Authorization: Bearer abc1234 rejected":                                                 {"abc1234"},
		"dial postgres://admin:p@ss@db.internal:5432/crm failed":                                 {"admin", "p@ss", ":ss"},
		"hapikey=abcdef0123 client_id=my-client-7":                                               {"abcdef0123", "my-client-7"},
	}
	for in, secrets := range cases {
		out := Redact(in)
		for _, sec := range secrets {
			if strings.Contains(out, sec) {
				t.Errorf("Redact(%q) = %q still contains %q", in, out, sec)
			}
		}
	}
	if got := Redact("HTTP 503: error code: ECONNRESET"); !strings.Contains(got, "ECONNRESET") {
		t.Errorf("an error code must stay readable: %q", got)
	}
}
