package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/n8n-guard/n8n-guard/notify"
)

func TestConsoleLinks(t *testing.T) {
	key := &Record{Header: Header{Kind: KindKeyUnknown, Count: 1}, KeyPayload: KeyPayload{Namespace: "bookings", Key: "b 1&x"}}
	group := &Record{Header: Header{Kind: KindKeyUnknown, Count: 700}, KeyPayload: KeyPayload{Namespace: "bookings", Key: "b1"}}
	escalatedGroup := &Record{Header: Header{Kind: KindEscalation, Count: 700}, KeyPayload: KeyPayload{Namespace: "bookings", Key: "b1"},
		Escalation: Escalation{EscalatedKind: KindKeyUnknown}}
	breaker := &Record{Header: Header{Kind: KindBreakerOpened}, Breaker: Breaker{Destination: "hub spot"}}
	overdue := &Record{Header: Header{Kind: KindParkedOverdue, Count: 3}, KeyPayload: KeyPayload{Namespace: "crm"}, Breaker: Breaker{Destination: "hubspot"}}
	failure := &Record{Header: Header{Kind: KindWorkflowFailed}}
	const base = "https://guard.example.org/"
	cases := []struct {
		name string
		r    *Record
		want []string
	}{
		{"a key", key, []string{"Open in console https://guard.example.org/ui/key?key=b+1%26x&namespace=bookings"}},
		{"a group of keys", group, []string{
			"Open in console https://guard.example.org/ui/keys?search=1&namespace=bookings&state=unknown",
			"Decide in console https://guard.example.org/ui/bulk?namespace=bookings&state=unknown"}},
		{"an escalation of a group: the key it names", escalatedGroup, []string{"Open in console https://guard.example.org/ui/key?key=b1&namespace=bookings"}},
		{"an outage", breaker, []string{"Open in console https://guard.example.org/ui/destination?name=hub+spot"}},
		{"parked keys overdue", overdue, []string{
			"Open in console https://guard.example.org/ui/keys?search=1&destination=hubspot&namespace=crm&state=parked",
			"Decide in console https://guard.example.org/ui/bulk?destination=hubspot&namespace=crm&state=parked"}},
		{"a failed execution", failure, []string{"Open in console https://guard.example.org/ui/failures"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, l := range ConsoleLinks(tc.r, base) {
				got = append(got, l.Label+" "+l.URL)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if ConsoleLinks(tc.r, "") != nil {
				t.Fatal("links without a public URL")
			}
		})
	}
}

func TestPublicURLChecked(t *testing.T) {
	for _, bad := range []string{"guard.example.org", "ftp://guard.example.org", "https://guard.example.org/?token=1", "https://u:p@guard.example.org", "https://"} {
		cfg := testConfig()
		cfg.PublicURL = bad
		if _, err := New(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "public_url") {
			t.Fatalf("public URL %q taken: %v", bad, err)
		}
	}
}

// Without a public URL the start says once that messages have no links;
// with one, a key's message links to its console page.
func TestSlackMessagesLinkToTheConsole(t *testing.T) {
	for _, public := range []string{"", "https://guard.example.org"} {
		cfg := decisionConfig()
		cfg.PublicURL = public
		k := newGroupHarness(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- k.svc.Run(ctx) }()
		time.Sleep(20 * time.Millisecond)
		cancel()
		<-done
		n := k.unknownKey("booking-4711")
		post := k.calls("chat.postMessage")[0]
		link := "https://guard.example.org/ui/key?key=booking-4711\u0026namespace=bookings"
		said := k.logs.Matching("Slack messages will have no console links: public_url is not set")
		if public == "" && (said != 1 || strings.Contains(post.Blocks, "/ui/key")) {
			t.Fatalf("without public_url: log lines %d, message %s", said, post.Blocks)
		}
		if public != "" && (said != 0 || !strings.Contains(post.Blocks, link)) {
			t.Fatalf("with public_url: log lines %d, no link %s in %s (%s)", said, link, post.Blocks, n.ID)
		}
	}
}
