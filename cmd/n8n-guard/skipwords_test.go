package main

import (
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The CLI's bulk says why keys were left alone in the console's words,
// beside the code: "parked_waiting" alone told nobody what to do.
func TestBulkSkippedSaysTheConsolesWords(t *testing.T) {
	got := skippedText(map[string]int{keystore.SkipParkedWaiting: 3, keystore.SkipLiveLease: 1})
	for _, want := range []string{
		"3 " + keystore.SkipParkedWaiting + " (" + keystore.SkipWords(keystore.SkipParkedWaiting) + ")",
		"1 " + keystore.SkipLiveLease + " (" + keystore.SkipWords(keystore.SkipLiveLease) + ")",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("left alone: %q, want it to say %q", got, want)
		}
	}
}
