package notify

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/internal/redact"
)

// Limits of what is kept from a payload.
const (
	maxMessageRunes = 300
	maxNameRunes    = 120
)

// clean redacts, drops control characters, folds white space runs and
// truncates to max runes.
func clean(s string, max int) string {
	return Truncate(redact.Redact(cleanIdentity(s, 0)), max)
}

// cleanIdentity is clean without the redaction, for who requested an
// approval: the approver must see who asked (an e-mail address is the
// requester, not a secret of the payload; four eyes compares it), and the
// guard validated it as a person identifier at the reserve. 0: no cut.
func cleanIdentity(s string, max int) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || r == '\r' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if max == 0 {
		return s
	}
	return Truncate(s, max)
}

func Truncate(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// Normalisation for grouping: the same failure with another order number,
// execution id or timestamp is the same failure.
var (
	uuidRE   = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	hexIDRE  = regexp.MustCompile(`(?i)\b(?:0x)?[0-9a-f]*[0-9][0-9a-f]*\b`)
	mixIDRE  = regexp.MustCompile(`\b[A-Za-z_-]*[0-9][A-Za-z0-9_-]*\b`)
	numberRE = regexp.MustCompile(`[0-9]+`)
)

func normalizeMessage(s string) string {
	s = strings.ToLower(s)
	s = uuidRE.ReplaceAllString(s, "#")
	s = hexIDRE.ReplaceAllString(s, "#")
	s = mixIDRE.ReplaceAllString(s, "#")
	s = numberRE.ReplaceAllString(s, "#")
	return strings.Join(strings.Fields(s), " ")
}
