package keystore_test

import (
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// IssueSpellings are the requester spellings of issue 44 that Ana
// approved herself with before four eyes read addresses as addresses.
var issueSpellings = []struct{ name, spelling, why string }{
	{"n8n's Email Trigger form", "Ana Lopez <ana@example.com>", "is the address ana@example.com"},
	{"a mailto: link", "mailto:ana@example.com", "is the address ana@example.com"},
	{"a plus-tag", "ana+x@example.com", "is the address ana@example.com"},
	{"a trailing dot", "ana@example.com.", "is the address ana@example.com"},
	{"an accent", "aná@example.com", "looks like"},
	{"a Unicode hyphen in her name", "Ana\u2010Lopez", "Ana-Lopez"},
}

// Four eyes reads addresses as addresses: every spelling of issue 44 is
// refused before the decision, with words that say why, without people:
// and with it; a person who only shares a domain is not. Mutations: the
// address forms left out of forms (address.go): the four address
// spellings pass; the skeleton comparison left out: "aná" passes.
func TestFourEyesReadsAddressesAsAddresses(t *testing.T) {
	ana := keystore.People{}
	withPeople, err := keystore.NewPeople(map[string][]string{"ana": {"ana@example.com", "Ana-Lopez", "U0ANA"}, "bob": {"bob@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []struct {
		name   string
		people keystore.People
	}{{"without people:", ana}, {"with people:", withPeople}} {
		for _, tc := range issueSpellings {
			t.Run(dir.name+"/"+tc.name, func(t *testing.T) {
				cur, err := requestedBy(t, tc.spelling)
				if err != nil {
					t.Fatal(err)
				}
				err = decide(t, cur, gatedWith(dir.people), "ana@example.com", "ana@example.com", "Ana-Lopez")
				e, _ := err.(*errs.Error)
				if e == nil || e.Code != errs.Forbidden || e.Fields[0].Rule != "four_eyes" || !strings.Contains(e.Message, tc.why) ||
					!strings.Contains(e.Message, "nothing changed") {
					t.Fatalf("%q approved by ana: %v, want forbidden saying %q", tc.spelling, err, tc.why)
				}
			})
		}
	}
	// Her Slack user: the six are hers through what people: lists for it
	// (a requester people: does not know, "aná", looks like one of them).
	for _, tc := range issueSpellings {
		t.Run("her Slack user/"+tc.name, func(t *testing.T) {
			cur, err := requestedBy(t, tc.spelling)
			if err != nil {
				t.Fatal(err)
			}
			err = decide(t, cur, gatedWith(withPeople), "ana (Slack U0ANA)", "U0ANA")
			if e, _ := err.(*errs.Error); e == nil || e.Fields[0].Rule != "four_eyes" || !strings.Contains(e.Message, "requester") {
				t.Fatalf("%q approved by ana's Slack user: %v", tc.spelling, err)
			}
		})
	}
	t.Run("another person of the same domain", func(t *testing.T) {
		cur, err := requestedBy(t, "Bob Stone <bob@example.com>")
		if err != nil {
			t.Fatal(err)
		}
		if err := decide(t, cur, gatedWith(withPeople), "ana@example.com", "ana@example.com", "Ana-Lopez"); err != nil {
			t.Fatalf("bob's request refused to ana: %v", err)
		}
	})
	t.Run("plus-tags kept by the operator", func(t *testing.T) {
		keep, err := keystore.NewPeople(nil, keystore.PersonMatch{KeepPlusTags: true})
		if err != nil {
			t.Fatal(err)
		}
		cur, err := requestedBy(t, "ana+x@example.com")
		if err != nil {
			t.Fatal(err)
		}
		// Kept, the tag is another mailbox: another person's.
		if err := decide(t, cur, gatedWith(keep), "ana@example.com", "ana@example.com"); err != nil {
			t.Fatalf("ana+x refused to ana with plus-tags kept: %v", err)
		}
	})
}

func TestAddressesAreReadAsMailProvidersRead(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		keep     bool
	}{
		{"Ana Lopez <ana@example.com>", "ana@example.com", false},
		{`"Lopez, Ana" <Ana@Example.COM>`, "ana@example.com", false},
		{"mailto:ana@example.com?subject=hi", "ana@example.com", false},
		{"MAILTO:ana%40example.com", "ana@example.com", false},
		{"ana+x@example.com", "ana@example.com", false},
		{"ana+x@example.com", "ana+x@example.com", true},
		{"ana@example.com..", "ana@example.com", false},
		{"Ana Lopez", "", false},
		{"U0ANA", "", false},
	} {
		got, ok := keystore.PersonMatch{KeepPlusTags: tc.keep}.Address(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("Address(%q) = %q %v, want %q", tc.in, got, ok, tc.want)
		}
	}
}
