package console_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The approvals list and the key's page show what the event is (the
// reserve's summary) as text: markup in it is escaped. A key without a
// summary shows no summary.
func TestApprovalsAndKeyPageShowTheSummary(t *testing.T) {
	s, store := siteOn(t, gatedPolicies(keystore.People{}))
	for key, summary := range map[string]string{"inv-4711": `Invoice 4711 · 12,000 EUR · <b onmouseover=alert(1)>ACME</b>`, "inv-4712": ""} {
		_, err := store.Reserve(s.ctx, keystore.ReserveRequest{Namespace: "invoices", Key: key, Owner: "n8n exec 7", RequestedBy: "ann",
			ResumeURL: "http://n8n.local/webhook-waiting/" + key, Fingerprint: "invoice " + key, Summary: summary})
		if err != nil {
			t.Fatal(err)
		}
	}
	const shown = `Invoice 4711 · 12,000 EUR · &lt;b onmouseover=alert(1)&gt;ACME&lt;/b&gt;`
	c, _ := signedIn(t, s, actToken)
	_, page := fetch(t, c, s.url+"/ui/approvals")
	row := func(key string) string {
		i := strings.Index(page, `<tr id="approval-`+key+`">`)
		if i < 0 {
			t.Fatalf("no row of %s:\n%s", key, page)
		}
		r := page[i:]
		return r[:strings.Index(r, "</tr>")]
	}
	if r := row("inv-4711"); !strings.Contains(r, `<span class="summary">`+shown+`</span>`) || !strings.Contains(r, "ann") {
		t.Fatalf("the approvals row does not show the summary (escaped) with the requester:\n%s", r)
	}
	if r := row("inv-4712"); strings.Contains(r, `class="summary"`) {
		t.Fatalf("a row without a summary shows one:\n%s", r)
	}
	if strings.Contains(page, "<b onmouseover") {
		t.Fatal("the summary is in the approvals page unescaped")
	}

	_, key := fetch(t, c, s.url+"/ui/key?"+url.Values{"namespace": {"invoices"}, "key": {"inv-4711"}}.Encode())
	if !strings.Contains(key, `<dd id="key-summary">`+shown+`</dd>`) || strings.Contains(key, "<b onmouseover") {
		t.Fatalf("the key's page does not show the summary as text:\n%s", key)
	}
	if _, other := fetch(t, c, s.url+"/ui/key?"+url.Values{"namespace": {"invoices"}, "key": {"inv-4712"}}.Encode()); strings.Contains(other, "key-summary") {
		t.Fatal("the page of a key without a summary shows one")
	}
}
