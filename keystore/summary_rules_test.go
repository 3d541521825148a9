package keystore_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// A summary is one line the approvers read as it is: a line or paragraph
// separator (a line break that is not a control character) is 400
// invalid_request naming summary, as a newline is; a bidi embedding,
// override or isolate (which reorders what the approvers read after it:
// the requester and who is asked, in Slack's notification text) is
// dropped, so an item's text never costs the write. Marks that reorder
// nothing (a right-to-left mark, a zero-width (non-)joiner in a Persian
// name or an emoji) are kept.
// Mutation tried: the summary's tag without one_line, Normalize without
// dropBidi: each is recorded as sent.
func TestASummaryOnSeveralLinesIsRefusedAndBidiControlsAreDropped(t *testing.T) {
	for name, s := range map[string]string{
		"line separator":      "Invoice 4711\u2028Approved by finance already",
		"paragraph separator": "Invoice 4711\u2029ACME",
	} {
		_, _, err := keystore.ReserveRequest{Namespace: "invoices", Key: "inv-1", Summary: s}.Normalize()
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.InvalidRequest || len(e.Fields) != 1 || e.Fields[0].Field != "summary" {
			t.Errorf("%s: %v, want 400 invalid_request naming summary", name, err)
		}
	}
	for name, c := range map[string]struct{ in, want string }{
		"right-to-left override":  {"Invoice 4711 \u202e000,21 RUE", "Invoice 4711 000,21 RUE"},
		"left-to-right embedding": {"Invoice \u202a4711\u202c", "Invoice 4711"},
		"first strong isolate":    {"Invoice \u20684711\u2069", "Invoice 4711"},
		"right-to-left mark":      {"חשבונית 4711\u200f · ACME", "חשבונית 4711\u200f · ACME"},
		"zero-width joiner":       {"Order 17 · 👩\u200d💻 team", "Order 17 · 👩\u200d💻 team"},
		"zero-width non-joiner":   {"فاکتور\u200cها 4711", "فاکتور\u200cها 4711"},
	} {
		r, _, err := (keystore.ReserveRequest{Namespace: "invoices", Key: "inv-1", Summary: c.in}).Normalize()
		if err != nil || r.Summary != c.want {
			t.Errorf("%s: recorded %q (%v), want %q", name, r.Summary, err, c.want)
		}
	}
}

// A summary is at most MaxSummaryLength characters as it is recorded:
// masking a secret may lengthen the text ("a@b.de" becomes "[email]"), so
// the masked summary is cut to the limit.
// Mutation tried: the summary masked and not cut: 223 characters recorded.
func TestAMaskedSummaryStaysWithinItsLimit(t *testing.T) {
	s := strings.TrimSpace(strings.Repeat("a@b.de ", 28)) // 195 characters, 28 addresses
	r, _, err := keystore.ReserveRequest{Namespace: "invoices", Key: "inv-1", Summary: s}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(r.Summary); n > keystore.MaxSummaryLength || strings.Contains(r.Summary, "@") {
		t.Fatalf("recorded summary of %d characters (limit %d): %q", n, keystore.MaxSummaryLength, r.Summary)
	}
}
