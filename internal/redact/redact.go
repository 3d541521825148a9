// Package redact masks secrets and personal data in the free text that
// n8n-guard keeps: a failure's message and a person's note (keystore), the
// few fields of an n8n error that notify keeps. The store refuses e-mail
// addresses in keys; in free text they are masked.
package redact

import (
	"regexp"
	"strings"
)

// The patterns err on the side of masking: a lost id in a message is cheaper
// than a leaked token.
//
// hints are cheap pre-checks (on the lower-cased text): a pattern runs only
// when one of them occurs, which keeps intake fast in a storm.
var redactions = []struct {
	hints []string
	re    *regexp.Regexp
	repl  string
}{
	// Credentials inside URLs: https://user:pass@host
	// (up to the last @ before the path: passwords may contain @).
	{[]string{"://"}, regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://)[^/\s]*@`), "${1}[redacted]@"},
	// E-mail addresses, also with non-ASCII local parts and URL-encoded @.
	{[]string{"@", "%40"}, regexp.MustCompile(`(?i)[\p{L}\p{N}._%+-]+(?:@|%40)[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)*\.[\p{L}]{2,}`), "[email]"},
	{[]string{"bearer", "basic", "token"}, regexp.MustCompile(`(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]+`), "${1} [redacted]"},
	// key=value, "key": "value", key: value for names that carry secrets.
	{[]string{"key", "secret", "pass", "pwd", "token", "auth", "session", "cookie", "sig", "client_id"},
		regexp.MustCompile(`(?i)((?:key|hapikey|client[_-]?id|api[_-]?key|apikey|access[_-]?key|secret|client[_-]?secret|password|passwd|pwd|token|access[_-]?token|refresh[_-]?token|auth|authorization|session|cookie|signature|sig|private[_-]?key)["']?\s*[:=]\s*["']?)[^\s"'&,;}]+`), "${1}[redacted]"},
	// Well-known token shapes.
	{[]string{"xox"}, regexp.MustCompile(`\bxox[abposre]-[A-Za-z0-9-]+`), "[redacted]"},
	{[]string{"xapp-"}, regexp.MustCompile(`\bxapp-[A-Za-z0-9-]+`), "[redacted]"},
	{[]string{"eyj"}, regexp.MustCompile(`\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`), "[redacted]"},
	{[]string{"_live_", "_test_"}, regexp.MustCompile(`\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{8,}`), "[redacted]"},
	{[]string{"sk-"}, regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`), "[redacted]"},
	{[]string{"gh", "glpat"}, regexp.MustCompile(`\b(?:ghp|gho|ghu|ghs|ghr|glpat)[_-][A-Za-z0-9_]{16,}`), "[redacted]"},
	{[]string{"github_pat_"}, regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`), "[redacted]"},
	{[]string{"akia"}, regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`), "[redacted]"},
	{[]string{"aiza"}, regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,}`), "[redacted]"},
	{[]string{"private key"}, regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`), "[redacted]"},
}

// longOpaqueRE finds long runs that look like keys or hashes; masked only
// when they mix letters and digits, so long words survive.
var longOpaqueRE = regexp.MustCompile(`[A-Za-z0-9_+/=-]{32,}`)

// Redact masks tokens, API keys and e-mail addresses in s.
func Redact(s string) string {
	lower := strings.ToLower(s)
	for _, r := range redactions {
		for _, h := range r.hints {
			if strings.Contains(lower, h) {
				s = r.re.ReplaceAllString(s, r.repl)
				lower = strings.ToLower(s)
				break
			}
		}
	}
	if len(s) < 32 {
		return s
	}
	return longOpaqueRE.ReplaceAllStringFunc(s, func(m string) string {
		if strings.ContainsAny(m, "0123456789") && strings.IndexFunc(m, isLetter) >= 0 {
			return "[redacted]"
		}
		return m
	})
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }
