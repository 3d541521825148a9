package notify

import (
	"strings"
	"testing"
)

func TestNormalizeForGrouping(t *testing.T) {
	same := []string{
		"Order 4711 failed: timeout after 30s (req 0b9f3c1e-2d4a-4c1b-9e8f-1a2b3c4d5e6f)",
		"Order 4712 failed: timeout after 31s (req 7a1c0e2f-9b8d-4e6f-8a7b-6c5d4e3f2a1b)",
	}
	if a, b := normalizeMessage(same[0]), normalizeMessage(same[1]); a != b {
		t.Fatalf("%q != %q", a, b)
	}
	if normalizeMessage("timeout") == normalizeMessage("connection refused") {
		t.Fatal("different messages grouped")
	}
}

func TestCleanTruncates(t *testing.T) {
	if got := clean(strings.Repeat("long message ", 100), maxMessageRunes); len([]rune(got)) != maxMessageRunes || !strings.HasSuffix(got, "…") {
		t.Errorf("not truncated: %d runes", len([]rune(got)))
	}
}
