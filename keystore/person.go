package keystore

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Identifiers of people (a reserve's requested_by, a decision's by, a
// token's person, the e-mail an identity provider vouched for, a Slack
// user) are compared by four eyes, so two spellings of one person must
// be one identifier. The rule, stated here once:
//
//   - refused: invalid UTF-8, control characters (no_control), invisible
//     format characters such as the zero-width space (no_format, as in
//     keys), and letters of scripts that do not go together (one_script,
//     below);
//   - the one spelling recorded and shown (NormalizePerson): Unicode NFKC
//     (fullwidth letters, the no-break space), every dash as '-', blank
//     runs as one space, trimmed; and the one compared (CanonicalPerson):
//     that, case folded.
//
// Confusables across scripts (a Cyrillic "а" in a Latin name) are refused
// rather than mapped: Unicode TR39's "highly restrictive" level, the one
// browsers apply to domain names. Its skeleton mapping would need the
// confusables table kept current with Unicode, and no Go module keeps it;
// a name in one script only is a person's real name, and one that mixes
// scripts is almost always a trick.

// NormalizePerson returns the spelling of a person identifier that is
// recorded and shown (its case kept). Invalid UTF-8 is returned as it is
// (the rules refuse it).
func NormalizePerson(s string) string {
	if !utf8.ValidString(s) {
		return s
	}
	s = strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Pd, r) { // hyphen, en dash, minus-like dashes
			return '-'
		}
		return r
	}, norm.NFKC.String(s))
	return strings.Join(strings.Fields(s), " ")
}

// CanonicalPerson returns the spelling of a person identifier that four
// eyes compares: NormalizePerson's, case folded.
func CanonicalPerson(s string) string {
	if !utf8.ValidString(s) {
		return s
	}
	return NormalizePerson(cases.Fold().String(NormalizePerson(s)))
}

// onePersonScript reports whether the letters of s come from one script,
// or from one of the sets TR39's highly restrictive level allows (Latin
// with the Chinese, Japanese or Korean scripts). Digits, punctuation and
// combining marks (scripts Common and Inherited) count for none.
func onePersonScript(s string) bool {
	var seen []string
	for _, r := range s {
		if !unicode.IsLetter(r) {
			continue
		}
		if sc := scriptOf(r); sc != "" && !slices.Contains(seen, sc) {
			seen = append(seen, sc)
		}
	}
	if len(seen) <= 1 {
		return true
	}
	for _, allowed := range [][]string{
		{"Latin", "Han", "Hiragana", "Katakana"},
		{"Latin", "Han", "Bopomofo"},
		{"Latin", "Han", "Hangul"},
	} {
		if !slices.ContainsFunc(seen, func(sc string) bool { return !slices.Contains(allowed, sc) }) {
			return true
		}
	}
	return false
}

// scriptOf is the Unicode script of r, "" for Common and Inherited.
func scriptOf(r rune) string {
	if unicode.Is(unicode.Latin, r) {
		return "Latin"
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			if name == "Common" || name == "Inherited" {
				return ""
			}
			return name
		}
	}
	return ""
}

// CheckPerson applies the person rule to an identifier given outside a
// request (a token's person, a name an identity provider vouched for):
// nil, or an invalid_request error naming field and the rule broken.
func CheckPerson(field, s string) error {
	switch {
	case !utf8.ValidString(s):
		return errs.InvalidField(field, "utf8", message(field, "utf8", ""))
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errs.InvalidField(field, "no_control", message(field, "no_control", ""))
	case strings.IndexFunc(s, invisible) >= 0:
		return errs.InvalidField(field, "no_format", message(field, "no_format", ""))
	case !onePersonScript(s):
		return errs.InvalidField(field, "one_script", message(field, "one_script", ""))
	}
	return nil
}

// People says which identifiers name the same person (the config's
// people: section), so that four eyes compares persons: the Slack user of
// the person who requested an event by e-mail may not approve it either.
// The zero value knows nobody, and four eyes compares spellings only.
type People struct {
	person map[string]string   // CanonicalPerson(identifier), or the address it spells -> the person's name
	ids    map[string][]string // the person's name -> their identifiers, as given
	// Match is how addresses are read (address.go).
	Match PersonMatch
}

// NewPeople makes the directory of persons, each with their identifiers
// (e-mail addresses, Slack user IDs, OpenID Connect subjects, other
// names); a person's name is one of their identifiers too. It refuses an
// identifier that breaks the person rule, or one given for two persons.
// match (at most one) says how addresses are read; the default folds
// plus-tags.
func NewPeople(identities map[string][]string, match ...PersonMatch) (People, error) {
	p := People{person: map[string]string{}, ids: map[string][]string{}}
	if len(match) > 0 {
		p.Match = match[0]
	}
	names := make([]string, 0, len(identities))
	for name := range identities {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, id := range append([]string{name}, identities[name]...) {
			if err := CheckPerson(name, id); err != nil {
				return People{}, fmt.Errorf("%s: %q: %s", name, id, errs.MessageOf(err))
			}
			if CanonicalPerson(id) == "" {
				return People{}, fmt.Errorf("%s: an empty identity", name)
			}
			for _, c := range p.Match.forms(id) {
				if other, ok := p.person[c]; ok && other != name {
					return People{}, fmt.Errorf("%s: %q is also an identity of %s: one identity names one person", name, id, other)
				}
				p.person[c] = name
			}
			p.ids[name] = append(p.ids[name], id)
		}
	}
	return p, nil
}

// Known reports whether the directory names anybody.
func (p People) Known() bool { return len(p.person) > 0 }

// Person is the person an identifier names: by its canonical spelling,
// the address it spells, or the name of "Name <addr>".
func (p People) Person(id string) (string, bool) {
	for _, c := range p.Match.forms(id) {
		if name, ok := p.person[c]; ok {
			return name, true
		}
	}
	return "", false
}

// fourEyes is the rule that the person who triggered an event (requester,
// as recorded) may not decide its approval. It compares the requester
// with each of the decider's identities and claimed spellings: as
// spelled, as the e-mail address it spells (address.go), and as it looks
// (a confusable spelling is refused, with words that say so); and the
// persons the vouched identities name in people. When people names
// anybody, a decider it does not know by a vouched identity (a Slack user
// ID, an identity provider's subject or e-mail, a named token's person)
// is refused: four eyes cannot tell that a Slack user or an e-mail it has
// never heard of is not the requester's other identity, and approvers
// are few and known to the operator. What the caller only claims (a
// shared token's by, a Slack user's chosen name) can add a refusal but
// never makes the decider known: otherwise whoever holds a shared token,
// or renames herself in Slack, could pass as someone else. A requester
// it does not know (someone outside, a customer's form) is compared by
// spelling only, and the warning it returns goes to the decision's
// history.
func fourEyes(requester string, req ApprovalRequest, people *People, verb string) (warning string, err error) {
	if requester == "" {
		return "", nil
	}
	var dir People
	if people != nil {
		dir = *people
	}
	refused := func(why string) error {
		return &errs.Error{Code: errs.Forbidden,
			Message: fmt.Sprintf("%s triggered this event and may not %s it: %s (four eyes: another approver must decide); nothing changed", req.By, verb, why),
			Fields:  []errs.FieldError{{Field: "by", Rule: "four_eyes"}}}
	}
	reqPerson, reqKnown := dir.Person(requester)
	reqForms := dir.Match.forms(requester)
	// same is why id names the requester, "" when it does not.
	same := func(id string) string {
		idForms := dir.Match.forms(id)
		for _, f := range reqForms {
			if slices.Contains(idForms, f) {
				if a, ok := dir.Match.Address(requester); ok && a == f {
					return fmt.Sprintf("the requester %q is the address %s, one of yours", requester, a)
				}
				return fmt.Sprintf("the requester %q is your %q", requester, id)
			}
		}
		if p, known := dir.Person(id); known && reqKnown && p == reqPerson {
			return fmt.Sprintf("the requester %q and your %q are one person, %s, under people:", requester, id, p)
		}
		for _, f := range reqForms {
			for _, g := range idForms {
				if skeleton(f) == skeleton(g) {
					return fmt.Sprintf("the requester %q looks like your %q (letters that look alike, or another spelling of one name: "+
						"four eyes refuses a requester confusable with the approver)", requester, id)
				}
			}
		}
		return ""
	}
	claimed := append([]string{req.By}, req.Claimed...)
	for _, id := range claimed {
		if why := same(id); why != "" {
			return "", refused(why)
		}
	}
	deciderKnown := false
	var theirs []string // what people: lists for the decider
	for _, id := range req.Identities {
		p, known := dir.Person(id)
		deciderKnown = deciderKnown || known
		if why := same(id); why != "" {
			return "", refused(why)
		}
		if known {
			theirs = append(theirs, dir.ids[p]...)
		}
	}
	// A requester people: does not know may still look like one of the
	// decider's other identities ("aná@example.com" to her Slack user).
	for _, id := range theirs {
		if why := same(id); why != "" {
			return "", refused(why)
		}
	}
	ids := append(slices.Clone(req.Identities), req.Claimed...)
	switch {
	case dir.Known() && !deciderKnown:
		return "", &errs.Error{Code: errs.Forbidden,
			Message: fmt.Sprintf("four eyes cannot tell whether %s is %s: none of their identities (%s) is named under people: in the configuration; nothing changed",
				req.By, requester, strings.Join(ids, ", ")),
			Fields: []errs.FieldError{{Field: "by", Rule: "known_person"}}}
	case dir.Known() && !reqKnown:
		return "four eyes compared the spelling only: the requester " + requester + " is not named under people:", nil
	}
	return "", nil
}
