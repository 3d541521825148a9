package notify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/n8n-guard/n8n-guard/notify"

	"github.com/n8n-guard/n8n-guard/keystore"
)

func acks(k *keysHarness, key string) []keystore.Transition {
	var out []keystore.Transition
	for _, h := range k.key(key).History {
		if h.Event == keystore.HistoryAcknowledged {
			out = append(out, h)
		}
	}
	return out
}

// "Leave it to me" is in the key's history, by the Slack person, and the
// key stays unknown; on a group, in the history of every key still open.
func TestLeaveItToMeIsInTheHistory(t *testing.T) {
	t.Run("one key", func(t *testing.T) {
		k := newKeysHarness(t)
		n := k.unknownKey("booking-4711")
		if err := k.click("U0STRANGER", ActionAck, n.ID); err != nil {
			t.Fatal(err)
		}
		if a := acks(k, "booking-4711"); len(a) != 0 {
			t.Fatalf("a refused click wrote the history: %+v", a)
		}
		if err := k.click("U0OFFICE", ActionAck, n.ID); err != nil {
			t.Fatal(err)
		}
		a := acks(k, "booking-4711")
		if len(a) != 1 || !strings.Contains(a[0].By, "U0OFFICE") || !strings.Contains(a[0].Detail, "Leave it to me") ||
			k.key("booking-4711").State != keystore.StateUnknown {
			t.Fatalf("history: %+v", k.key("booking-4711").History)
		}
		// Taken already: a second click writes nothing more.
		k.click("U0HELPER", ActionAck, n.ID)
		if a := acks(k, "booking-4711"); len(a) != 1 {
			t.Fatalf("acknowledged twice: %+v", a)
		}
	})
	t.Run("a group", func(t *testing.T) {
		k := newGroupHarness(t, decisionConfig())
		n := k.unknownStorm(10)
		for _, key := range []string{"booking-000", "booking-001"} {
			if _, err := k.ks.Resolve(context.Background(), keystore.ResolveRequest{Namespace: "bookings", Key: key,
				Resolution: keystore.StateCompleted, By: "ops", Note: "done"}); err != nil {
				t.Fatal(err)
			}
		}
		k.pass()
		if err := k.click("U0OFFICE", ActionAck, n.ID); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			key := fmt.Sprintf("booking-%03d", i)
			a := acks(k, key)
			switch {
			case i < 2 && len(a) != 0:
				t.Fatalf("%s, decided before, was acknowledged: %+v", key, a)
			case i >= 2 && (len(a) != 1 || !strings.Contains(a[0].By, "U0OFFICE") || !strings.Contains(a[0].Detail, "group of 10 keys")):
				t.Fatalf("%s: %+v", key, k.key(key).History)
			}
		}
	})
}
