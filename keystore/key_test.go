package keystore

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/errs"
)

func TestNormalizeKey(t *testing.T) {
	cases := []struct {
		name, in, want string
		rule           string
	}{
		{"source event id", "evt_123", "evt_123", ""},
		{"surrounding white space is trimmed", "  evt_123\t", "evt_123", ""},
		{"booking number with spaces inside", "BK 2026 0042", "BK 2026 0042", ""},
		{"unicode", "Bestellung-Müller-7", "Bestellung-Müller-7", ""},
		{"255 bytes", strings.Repeat("k", 255), strings.Repeat("k", 255), ""},
		{"missing key", "", "", "required"},
		{"only white space", " \n ", "", "required"},
		{"256 bytes", strings.Repeat("k", 256), "", "max=255"},
		{"invalid utf-8", "evt\xff", "", "utf8"},
		{"replacement character (a decoded invalid escape)", "evt\ufffd", "", "utf8"},
		{"control character", "evt\x00x", "", "no_control"},
		{"newline inside", "evt\nx", "", "no_control"},
		{"e-mail address", "anna@example.com", "", "no_email"},
		{"e-mail inside a key", "lead-anna.berg+x@example.co.uk-1", "", "no_email"},
		{"an at sign alone is fine", "team@hq", "team@hq", ""},
		{"zero-width space", "evt\u200b1", "", "no_format"},
		{"zero-width joiner", "evt\u200d1", "", "no_format"},
		{"byte order mark in front", "\ufeffevt1", "", "no_format"},
		{"right-to-left override", "invoice-\u202efdp.exe", "", "no_format"},
		{"bidi isolate", "evt\u20661\u2069", "", "no_format"},
		{"left-to-right mark", "evt1\u200e", "", "no_format"},
		{"soft hyphen", "Bestel\u00adlung", "", "no_format"},
		{"a visible emoji is fine", "order-\U0001F4E6-7", "order-\U0001F4E6-7", ""},
		{"no-break space inside is visible and fine", "BK\u00a02026", "BK\u00a02026", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := NormalizeKey(c.in)
			if c.rule == "" {
				if err != nil || got != c.want {
					t.Fatalf("NormalizeKey(%q) = %q, %v; want %q", c.in, got, err, c.want)
				}
				return
			}
			var e *errs.Error
			if err == nil || !asError(err, &e) || e.Code != errs.InvalidKey || e.Fields[0].Rule != c.rule {
				t.Fatalf("NormalizeKey(%q) = %q, %v; want invalid_key rule %s", c.in, got, err, c.rule)
			}
			if c.rule == "no_format" && !strings.Contains(e.Message, "U+") {
				t.Fatalf("the detail must name the character: %q", e.Message)
			}
		})
	}
}

func asError(err error, e **errs.Error) bool {
	x, ok := err.(*errs.Error)
	*e = x
	return ok
}

func TestNamespaces(t *testing.T) {
	for _, ok := range []string{"crm-contacts", "booking-confirmations", "a", "v1.leads_2", strings.Repeat("a", 64)} {
		if !ValidNamespace(ok) {
			t.Errorf("%q should be valid", ok)
		}
	}
	for _, bad := range []string{"", "-crm", "CRM", "crm contacts", "crm/x", strings.Repeat("a", 65), "ü"} {
		if ValidNamespace(bad) {
			t.Errorf("%q should be invalid", bad)
		}
	}
}

func TestCanonicalFingerprint(t *testing.T) {
	same := []string{
		`{"a":1,"b":{"c":[1,2,3],"d":"x"}}`,
		"{ \"b\" : { \"d\" : \"x\", \"c\" : [1, 2.0, 3e0] }, \"a\" : 1.0 }",
		`{"b":{"d":"\u0078","c":[1,2,3]},"a":1}`,
	}
	want, err := PayloadFingerprint(json.RawMessage(same[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range same[1:] {
		got, err := PayloadFingerprint(json.RawMessage(s))
		if err != nil || got.Conflicts(want) {
			t.Fatalf("%s: fingerprint differs (%v)", s, err)
		}
	}
	for _, s := range []string{`{"a":2,"b":{"c":[1,2,3],"d":"x"}}`, `{"a":1,"b":{"c":[3,2,1],"d":"x"}}`, `{"a":"1","b":{"c":[1,2,3],"d":"x"}}`} {
		got, _ := PayloadFingerprint(json.RawMessage(s))
		if !got.Conflicts(want) {
			t.Fatalf("%s: must differ", s)
		}
	}
	// Big integer IDs must not collide through float64 rounding.
	a, _ := PayloadFingerprint(json.RawMessage(`{"id":12345678901234567890}`))
	b, _ := PayloadFingerprint(json.RawMessage(`{"id":12345678901234567891}`))
	if !a.Conflicts(b) {
		t.Fatal("big integers collided")
	}
	if ClientFingerprint("x").Conflicts(want) {
		t.Fatal("a client fingerprint cannot be compared with a payload hash")
	}
}

func FuzzNormalizeKey(f *testing.F) {
	for _, s := range []string{"evt_123", "  x  ", "", "a@b.co", "\x00", "Müller", strings.Repeat("é", 130), "\u2028k\u00a0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := NormalizeKey(in)
		if err != nil {
			if errs.CodeOf(err) != errs.InvalidKey {
				t.Fatalf("error code %s", errs.CodeOf(err))
			}
			return
		}
		if k == "" || len(k) > MaxKeyBytes || !utf8.ValidString(k) || strings.IndexFunc(k, unicode.IsControl) >= 0 ||
			strings.IndexFunc(k, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) >= 0 {
			t.Fatalf("accepted a key that breaks the rules: %q", k)
		}
		if k != strings.TrimSpace(k) {
			t.Fatalf("not trimmed: %q", k)
		}
		if again, err := NormalizeKey(k); err != nil || again != k {
			t.Fatalf("not idempotent: %q -> %q, %v", k, again, err)
		}
	})
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x"]}`, `[1.0, 1e2, -0, 0.1]`, `"\u00e9"`, `{"z":{"y":{}}}`, `12345678901234567890`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := CanonicalJSON(doc)
		if err != nil {
			return
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form is not JSON: %s", c)
		}
		c2, err := CanonicalJSON(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("canonical form not stable: %s -> %s (%v)", c, c2, err)
		}
	})
}
