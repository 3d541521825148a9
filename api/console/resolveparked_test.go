package console_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The console decides a parked key by the domain's one rule: a key whose
// execution waits for the guard's resume call gets no form, and its page
// says why and what to do instead in the words the API answers; a posted
// resolution is refused the same way (parked_waiting) and changes
// nothing; a key n8n lost gets the form.
func TestConsoleResolvesParkedKeysByTheOneRule(t *testing.T) {
	s, _ := siteOn(t, parkingDestinations(keystore.Policies{}, "hubspot"))
	s.parkedKey("crm", "evt-wait", "hubspot", n8nBase+"/webhook-waiting/81")
	s.lostKey("crm", "evt-lost", "hubspot", n8nBase+"/webhook-waiting/82")
	want := keystore.ResolveParked(s.lookup("crm", "evt-wait"), false)
	if want == nil {
		t.Fatal("the domain lets a waiting parked key be resolved: nothing to show")
	}

	c, csrf := signedIn(t, s, actToken)
	_, page := fetch(t, c, s.url+keyURL("crm", "evt-wait"))
	d := parsePage(t, page)
	if d.byID("decide-h") != nil {
		t.Error("a parked key whose execution waits is offered the decision form")
	}
	note := d.byID("undecidable")
	if note == nil || !strings.Contains(textOf(note), "stop the execution in n8n") {
		t.Fatalf("the page does not say why it may not be resolved, nor what to do:\n%s", page)
	}
	resp := postForm(t, c, s.url+"/ui/key/resolve", url.Values{"csrf": {csrf}, "namespace": {"crm"}, "key": {"evt-wait"}, "action": {"complete"}, "note": {"entered by hand"}})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(html.UnescapeString(string(body)), "stop the execution in n8n") {
		t.Fatalf("a posted resolution: %d, want 409 with the domain's words:\n%s", resp.StatusCode, body)
	}
	if r := s.lookup("crm", "evt-wait"); r.State != keystore.StateParked {
		t.Fatalf("a refused resolution changed the key: %s", r.State)
	}

	_, page = fetch(t, c, s.url+keyURL("crm", "evt-lost"))
	if d := parsePage(t, page); d.byID("decide-h") == nil || d.byID("undecidable") != nil {
		t.Errorf("a lost parked key is not offered the decision form:\n%s", page)
	}
}

func keyURL(ns, key string) string {
	return "/ui/key?" + url.Values{"namespace": {ns}, "key": {key}}.Encode()
}
