package keystore_test

import (
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// SixSpellings are ways to write ana@example.com that a person reads as
// hers: each is either refused where it is given or spelled as hers.
var sixSpellings = []struct {
	name, spelling string
	refused        string // the rule that refuses it; "": four eyes knows it as hers
}{
	{"a leading space", " ana@example.com", ""},
	{"a trailing zero-width space", "ana@example.com\u200b", "no_format"},
	{"a trailing no-break space", "ana@example.com\u00a0", ""},
	{"a Cyrillic a", "\u0430na@example.com", "one_script"},
	{"a Unicode hyphen", "ana\u2010lopez@example.com", ""},
	{"fullwidth letters", "\uff41\uff4e\uff41@example.com", ""},
}

func TestPersonIdentifiersHaveOneSpelling(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{" Ana@Example.com\u00a0", "ana@example.com"},
		{"\uff21\uff4e\uff41", "ana"},
		{"ana\u2010lopez", "ana-lopez"},
		{"ana\u2013lopez", "ana-lopez"},
		{"Ana   Lopez", "ana lopez"},
		{"STRASSE", "strasse"},
		{"Straße", "strasse"},
		{"U0ANA", "u0ana"},
		{"山田 太郎", "山田 太郎"},
	} {
		if got := keystore.CanonicalPerson(tc.in); got != tc.want {
			t.Errorf("CanonicalPerson(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Recorded and shown, a name keeps its case.
	for _, tc := range []struct{ in, want string }{
		{" Ana@Example.com\u00a0", "Ana@Example.com"},
		{"\uff21\uff4e\uff41", "Ana"},
		{"Ana\u2010Lopez", "Ana-Lopez"},
		{"U0ANN", "U0ANN"},
	} {
		if got := keystore.NormalizePerson(tc.in); got != tc.want {
			t.Errorf("NormalizePerson(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The person rule refuses what would make two names that look alike:
// invisible characters (as in keys) and scripts mixed in one name; a
// name in one script, or Latin with Chinese, Japanese or Korean, is a
// name.
// Mutation tried: no_format left out of the requested_by tag: the
// zero-width space case fails.
func TestPersonRuleRefusesInvisibleAndMixedScripts(t *testing.T) {
	for _, tc := range []struct {
		name, in, rule string
	}{
		{"zero-width space", "ana\u200b@example.com", "no_format"},
		{"right-to-left override", "ana\u202e@example.com", "no_format"},
		{"soft hyphen", "an\u00ada", "no_format"},
		{"Cyrillic a in a Latin name", "\u0430na@example.com", "one_script"},
		{"Greek omicron in a Latin name", "b\u03bfb", "one_script"},
		{"a control character", "ana\x07", "no_control"},
		{"Cyrillic name", "Анна", ""},
		{"Greek name", "Ελένη", ""},
		{"Japanese name with Latin", "田中さん (tanaka)", ""},
		{"Latin with accents", "José Müller", ""},
		{"a Cyrillic name with a Latin note", "Анна (Slack U0ANA)", "one_script"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := keystore.ReserveRequest{Namespace: "invoices", Key: "inv_1", RequestedBy: tc.in}.Normalize()
			if tc.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			wantRule(t, err, "requested_by", tc.rule)
			_, err = keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: tc.in}.Normalize(false)
			wantRule(t, err, "by", tc.rule)
			_, err = keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: "bob", Identities: []string{tc.in}}.Normalize(false)
			wantRule(t, err, "by", tc.rule)
			if tc.rule != "one_script" { // a history's by may name a person with a note in another script
				_, err = keystore.ResolveRequest{Namespace: "invoices", Key: "inv_1", By: tc.in, Resolution: keystore.StateCompleted, Note: "n"}.Normalize()
				wantRule(t, err, "by", tc.rule)
			}
		})
	}
}

// A history's by names the decider with how they came ("Анна (Slack
// U0ANA)"): its identities are held to the person rule, not the note.
func TestDecidersByMayNoteHowTheyCame(t *testing.T) {
	if _, err := (keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: "Анна (Slack U0ANA)", Identities: []string{"U0ANA", "Анна"}}).Normalize(false); err != nil {
		t.Fatal(err)
	}
}

func wantRule(t *testing.T, err error, field, rule string) {
	t.Helper()
	e, ok := err.(*errs.Error)
	if !ok || e.Code != errs.InvalidRequest || len(e.Fields) != 1 || e.Fields[0] != (errs.FieldError{Field: field, Rule: rule}) {
		t.Fatalf("%v, want invalid_request on %s, rule %s", err, field, rule)
	}
}

var directory = func() keystore.People {
	p, err := keystore.NewPeople(map[string][]string{
		"ana": {"ana@example.com", "ana-lopez@example.com", "U0ANA", "sub-ana"},
		"bob": {"bob@example.com", "U0BOB"},
	})
	if err != nil {
		panic(err)
	}
	return p
}()

func gatedWith(people keystore.People) keystore.NamespacePolicy {
	return keystore.Policies{People: people,
		Namespaces: map[string]keystore.NamespacePolicy{"invoices": {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}.Namespace("invoices")
}

// requestedBy is a key requested for approval by who, as a store
// records it (the reserve normalized first).
func requestedBy(t *testing.T, who string) (*keystore.Record, error) {
	t.Helper()
	req, fp, err := keystore.ReserveRequest{Namespace: "invoices", Key: "inv_1", Destination: "crm", Fingerprint: "inv_1 v1",
		ResumeURL: "http://n8n.local/webhook-waiting/1", RequestedBy: who}.Normalize()
	if err != nil {
		return nil, err
	}
	s, err := keystore.DecideReserve(nil, keystore.NewBreaker("crm"), req, fp, gatedWith(directory), now)
	if err != nil {
		t.Fatal(err)
	}
	return s.Record, nil
}

func decide(t *testing.T, cur *keystore.Record, np keystore.NamespacePolicy, by string, ids ...string) error {
	t.Helper()
	req, err := keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: by, Identities: ids}.Normalize(false)
	if err != nil {
		return err
	}
	_, err = keystore.DecideApprove(cur, req, np, now)
	return err
}

// Four eyes compares persons: the requester's other identities (her
// Slack user, her other address) are her; the six spellings of her
// address are refused where given or are her; someone people: does not
// know may not decide while it names anybody; a requester it does not
// know is compared by spelling.
// Mutations tried: fourEyes comparing the raw spellings (EqualFold, as
// before): the spelling cases fail; the person comparison left out: the
// Slack user case fails; the unknown decider allowed: its case fails.
func TestFourEyesComparesPersons(t *testing.T) {
	np := gatedWith(directory)
	for _, tc := range []struct {
		name, requester, by string
		ids                 []string
		rule                string // "": approved
	}{
		{"her Slack user", "ana@example.com", "Ana (Slack U0ANA)", []string{"U0ANA", "ana"}, "four_eyes"},
		{"her other address", "ana-lopez@example.com", "ana@example.com (API token t)", []string{"ana@example.com"}, "four_eyes"},
		{"her OIDC subject", "U0ANA", "x (console, OIDC)", []string{"someone@example.com", "sub-ana"}, "four_eyes"},
		{"her name in other case", "ANA@EXAMPLE.COM", "ana@example.com", nil, "four_eyes"},
		{"another known person", "ana@example.com", "Bob (Slack U0BOB)", []string{"U0BOB"}, ""},
		{"someone people: does not know", "ana@example.com", "Eve (Slack U0EVE)", []string{"U0EVE", "eve"}, "known_person"},
		{"a requester people: does not know", "customer@example.org", "bob@example.com", []string{"bob@example.com"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, err := requestedBy(t, tc.requester)
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "a requester people: does not know" {
				req, _ := keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: tc.by, Identities: tc.ids, Note: "ok"}.Normalize(false)
				s, err := keystore.DecideApprove(cur, req, np, now)
				if h := s.Record.History[len(s.Record.History)-1]; err != nil || h.Detail != "ok — four eyes compared the spelling only: the requester customer@example.org is not named under people:" {
					t.Fatalf("%v: the history does not warn: %+v", err, h)
				}
			}
			err = decide(t, cur, np, tc.by, tc.ids...)
			switch e, _ := err.(*errs.Error); {
			case tc.rule == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.rule != "" && (e == nil || e.Code != errs.Forbidden || e.Fields[0].Rule != tc.rule || !strings.Contains(e.Message, "nothing changed")):
				t.Fatalf("%v, want forbidden, rule %s", err, tc.rule)
			}
		})
	}

	// Without people:, four eyes compares spellings, one spelling each.
	for _, tc := range sixSpellings {
		t.Run("spelled with "+tc.name, func(t *testing.T) {
			cur, err := requestedBy(t, tc.spelling)
			if tc.refused != "" {
				wantRule(t, err, "requested_by", tc.refused)
				err = decide(t, nil, gated, tc.spelling)
				wantRule(t, err, "by", tc.refused)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mine := "ana@example.com"
			if strings.Contains(tc.spelling, "lopez") {
				mine = "ana-lopez@example.com"
			}
			if err := decide(t, cur, gated, "Ana", mine); errs.CodeOf(err) != errs.Forbidden {
				t.Fatalf("the requester approved her own request: %v", err)
			}
		})
	}
}

func TestPeopleDirectoryRefusesOneIdentityForTwo(t *testing.T) {
	_, err := keystore.NewPeople(map[string][]string{"ana": {"ana@example.com"}, "bob": {"ANA@example.com"}})
	if err == nil || !strings.Contains(err.Error(), "one identity names one person") {
		t.Fatalf("%v", err)
	}
	_, err = keystore.NewPeople(map[string][]string{"ana": {"ana\u200b@example.com"}})
	if err == nil || !strings.Contains(err.Error(), "invisible") {
		t.Fatalf("%v", err)
	}
}

// decideClaiming is decide with spellings the decider only claims (a
// shared token's by, a Slack user's chosen name) besides the vouched ids.
func decideClaiming(t *testing.T, cur *keystore.Record, np keystore.NamespacePolicy, by string, claimed, ids []string) error {
	t.Helper()
	req, err := keystore.ApprovalRequest{Namespace: "invoices", Key: "inv_1", By: by, Identities: ids, Claimed: claimed}.Normalize(false)
	if err != nil {
		return err
	}
	_, err = keystore.DecideApprove(cur, req, np, now)
	return err
}

// Only what a sign-in or a token vouches for makes a decider a person
// people: knows: ana, holding a shared token, cannot approve her own
// request by naming bob, nor can a Slack user people: does not know by
// calling herself bob. A claimed spelling still refuses when it is the
// requester, and bob's vouched Slack user ID decides whatever he claims.
func TestFourEyesCountsOnlyVouchedIdentities(t *testing.T) {
	np := gatedWith(directory)
	cur, err := requestedBy(t, "ana@example.com")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		by           string
		claimed, ids []string
		rule         string // "" when the approval goes through
	}{
		{"shared token naming bob", "bob@example.com (via shared token ops)", []string{"bob@example.com"}, nil, "known_person"},
		{"Slack user unknown, named bob", "bob (Slack U0EVE)", []string{"bob"}, []string{"U0EVE"}, "known_person"},
		{"Slack user unknown, named bob's address", "x (Slack U0EVE)", []string{"bob@example.com"}, []string{"U0EVE"}, "known_person"},
		{"shared token naming the requester", "ana@example.com (via shared token ops)", []string{"Ana@Example.com"}, nil, "four_eyes"},
		{"bob claiming the requester's address", "Bob (Slack U0BOB)", []string{"ana@example.com"}, []string{"U0BOB"}, "four_eyes"},
		{"bob claiming the requester's other address", "Bob (Slack U0BOB)", []string{"ana-lopez@example.com"}, []string{"U0BOB"}, "four_eyes"},
		{"bob by his Slack user ID", "Bob (Slack U0BOB)", []string{"Bob"}, []string{"U0BOB"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := decideClaiming(t, cur, np, c.by, c.claimed, c.ids)
			if c.rule == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if e, _ := err.(*errs.Error); e == nil || e.Code != errs.Forbidden || e.Fields[0].Rule != c.rule {
				t.Fatalf("got %v, want forbidden by rule %s", err, c.rule)
			}
		})
	}
}
