package keystore

import (
	"net/url"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Four eyes reads an identifier that spells an e-mail address as that
// address: "Ana Lopez <ana@example.com>" (what n8n's Email Trigger
// gives), "mailto:ana@example.com", "ANA@example.com", "ana@example.com."
// and, by default, "ana+x@example.com" are all ana@example.com, as mail
// providers deliver them to one mailbox. And it refuses a requester whose
// spelling only looks like one of the decider's ("aná", a Unicode hyphen,
// "rn" for "m"): the skeleton of Unicode TR39, in the small. The rule,
// stated here once, serves the API, the console and Slack alike: they all
// decide through fourEyes.

// PersonMatch is how four eyes reads addresses (the config's four_eyes:
// section).
type PersonMatch struct {
	// KeepPlusTags: ana+x@example.com is another address than
	// ana@example.com. The default drops the tag, as Gmail, Outlook and
	// Fastmail deliver both to one mailbox; an operator whose mail server
	// gives a tag a mailbox of its own keeps them.
	KeepPlusTags bool
}

// Address returns the e-mail address identifier s spells, folded as mail
// providers fold it (case, a trailing dot of the domain, and a plus-tag
// unless KeepPlusTags), and whether s spells one at all.
func (m PersonMatch) Address(s string) (string, bool) {
	s = NormalizePerson(s)
	if i := strings.LastIndex(s, "<"); i >= 0 && strings.HasSuffix(s, ">") {
		s = s[i+1 : len(s)-1] // "Name <addr>"
	}
	s = strings.TrimSpace(s)
	if len(s) >= 7 && strings.EqualFold(s[:7], "mailto:") {
		s = s[7:]
		if q := strings.IndexByte(s, '?'); q >= 0 {
			s = s[:q]
		}
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
	}
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || strings.ContainsFunc(s, unicode.IsSpace) {
		return "", false
	}
	local, domain := s[:at], strings.TrimRight(s[at+1:], ".")
	if domain == "" || strings.ContainsAny(local+domain, "<>@") {
		return "", false
	}
	if !m.KeepPlusTags {
		if p := strings.IndexByte(local, '+'); p > 0 {
			local = local[:p]
		}
	}
	return cases.Fold().String(local + "@" + domain), true
}

// displayName is the name part of "Name <addr>", "" without one.
func displayName(s string) string {
	s = NormalizePerson(s)
	if i := strings.LastIndex(s, "<"); i > 0 && strings.HasSuffix(s, ">") {
		return strings.Trim(strings.TrimSpace(s[:i]), `"`)
	}
	return ""
}

// forms are the spellings of identifier s four eyes compares as the same
// person: its canonical spelling, the address it spells, and the name of
// "Name <addr>".
func (m PersonMatch) forms(s string) []string {
	out := []string{CanonicalPerson(s)}
	if a, ok := m.Address(s); ok {
		out = append(out, a)
	}
	if n := displayName(s); n != "" {
		out = append(out, CanonicalPerson(n))
	}
	return out
}

// confusables maps letters that look like a Latin one (after case folding
// and with diacritics already stripped) to it: the part of Unicode's
// confusables.txt people's names and addresses meet. TR39's whole table
// changes with Unicode and no Go module keeps it; names mixing scripts are
// refused anyway (onePersonScript), so this covers the lookalikes within
// one script and digits.
var confusables = map[rune]string{
	'0': "o", '1': "l", 'ı': "i", 'ł': "l", 'ø': "o", 'đ': "d", 'ħ': "h", 'ŀ': "l", 'ß': "ss", 'æ': "ae", 'œ': "oe",
	'ɑ': "a", 'ɡ': "g", 'ǀ': "l", '|': "l", 'ʼ': "'", '‘': "'", '’': "'", '`': "'",
	// Cyrillic and Greek letters that look Latin.
	'а': "a", 'е': "e", 'о': "o", 'р': "p", 'с': "c", 'у': "y", 'х': "x", 'і': "i", 'ј': "j", 'ѕ': "s", 'һ': "h", 'ԁ': "d",
	'α': "a", 'ο': "o", 'ι': "i", 'ν': "v", 'κ': "k", 'ρ': "p", 'τ': "t", 'υ': "u",
}

// skeleton is s as it looks: NFKC, diacritics stripped, case folded,
// lookalike letters mapped (confusables, "rn" as "m", "vv" as "w"), and
// every run of spaces, underscores and dashes one '-'. Two identifiers
// with one skeleton are confusable.
func skeleton(s string) string {
	s = norm.NFD.String(cases.Fold().String(NormalizePerson(s)))
	var b strings.Builder
	sep := false
	for _, r := range s {
		switch {
		case unicode.Is(unicode.Mn, r): // a combining diacritic
			continue
		case r == ' ' || r == '_' || r == '-' || unicode.Is(unicode.Pd, r):
			if !sep {
				b.WriteByte('-')
			}
			sep = true
			continue
		}
		sep = false
		if c, ok := confusables[r]; ok {
			b.WriteString(c)
		} else {
			b.WriteRune(r)
		}
	}
	return strings.NewReplacer("rn", "m", "vv", "w").Replace(strings.Trim(b.String(), "-"))
}
