package main

import "testing"

// The console links n8n where people open it: N8N_URL, else the n8n of
// N8N_API_URL (its API base trimmed).
func TestN8nLinkBase(t *testing.T) {
	for _, tc := range []struct{ url, api, want string }{
		{"https://n8n.example.org/", "http://n8n:5678/api/v1", "https://n8n.example.org"},
		{"", "http://n8n:5678/api/v1", "http://n8n:5678"},
		{"", "", ""},
	} {
		if got := (Config{N8nURL: tc.url, N8nAPIURL: tc.api}).n8nLinkBase(); got != tc.want {
			t.Errorf("N8N_URL %q N8N_API_URL %q: %q, want %q", tc.url, tc.api, got, tc.want)
		}
	}
}
