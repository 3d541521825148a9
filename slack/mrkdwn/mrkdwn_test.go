package mrkdwn_test

import (
	"testing"

	"github.com/n8n-guard/n8n-guard/slack/mrkdwn"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"a mention", "<!channel> pay now", "&lt;!channel&gt; pay now"},
		{"a link", "<https://evil.example|click>", "&lt;https://evil.example|click&gt;"},
		{"an ampersand first, so an escape is not undone", "&lt;", "&amp;lt;"},
		{"plain text unchanged", "Acme GmbH *bold* `code`", "Acme GmbH *bold* `code`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mrkdwn.Escape(tc.in); got != tc.want {
				t.Fatalf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
