package console_test

import (
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// A key a check decided (keystore/check.go) shows the check's decision in
// its history: who (the check), what it found, which workflow and
// execution answered.
func TestKeyHistoryShowsDecisionsMadeByACheck(t *testing.T) {
	s, store := siteOn(t, keystore.Policies{
		Namespaces: map[string]keystore.NamespacePolicy{"leads": {Check: "lead-check"}}})
	s.unknownKey("leads", "evt-9", "n8n exec 9", "timeout")
	if _, ok, err := store.CheckAnswered(s.ctx, "leads", "evt-9", 1, keystore.CheckAnswer{Result: keystore.CheckFound,
		Reference: "crm-contact-9", Workflow: "n8n-guard: lead check", Execution: "4711"}); err != nil || !ok {
		t.Fatalf("the check's answer: %v %v", ok, err)
	}
	c, _ := signedIn(t, s, readToken)
	_, page := fetch(t, c, s.url+"/ui/key?namespace=leads&key=evt-9")
	for _, want := range []string{"<td>checked</td>", "check:lead-check", "found crm-contact-9 (workflow n8n-guard: lead check, execution 4711)", `id="key-state">completed<`} {
		if !strings.Contains(page, want) {
			t.Errorf("the key page lacks %q", want)
		}
	}
}
