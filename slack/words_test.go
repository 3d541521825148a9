package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// A stuck key's message says its reason in the words the console and the
// CLI show (keystore.ReasonWords), with the code to search for, never a
// bare code of its own.
func TestAStuckKeySaysItsReasonInTheConsolesWords(t *testing.T) {
	for _, reason := range []keystore.Reason{keystore.ReasonLeaseExpired, keystore.ReasonOutcomeUnknown} {
		r := &notify.Record{}
		r.Kind, r.Namespace, r.Key, r.Reason, r.KeyAttempt = notify.KindKeyUnknown, "crm", "evt-1", string(reason), 1
		b, err := json.Marshal(renderKeyUnknown(r, "<@U1>", "https://guard.example.org").Blocks)
		if err != nil {
			t.Fatal(err)
		}
		// Block Kit JSON escapes no letters of these words.
		if got := string(b); !strings.Contains(got, keystore.ReasonWords(reason)) || !strings.Contains(got, "`"+string(reason)+"`") {
			t.Errorf("the message of a key unknown for %s lacks %q and its code:\n%s", reason, keystore.ReasonWords(reason), got)
		}
	}
}
