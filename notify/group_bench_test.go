package notify_test

import (
	"context"
	"testing"
	"time"

	. "github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/decision"
)

// BenchmarkGroupDecision700: one click decides a group of 700 stuck keys
// (real bbolt files for the keys and the outbox, the fake Slack over
// loopback): every key resolved with its history entry, and every
// key-resolved event counted on the message, until it shows the final
// state.
func BenchmarkGroupDecision700(b *testing.B) {
	for range b.N {
		b.StopTimer()
		k := newGroupHarness(b, decisionConfig())
		n := k.unknownStorm(700)
		m := buttonValueRE.FindStringSubmatch(k.calls("chat.postMessage")[0].Blocks)
		b.StartTimer()
		k.decider().Dispatch(decision.Click{Action: ActionComplete, Value: m[1], UserID: "U0OFFICE", UserName: "Ana", Channel: "C0BOOK"})
		k.waitClicks()
		for {
			k.pass()
			r, err := k.svc.Outbox().Get(context.Background(), n.ID)
			if err != nil {
				b.Fatal(err)
			}
			if r.OpenKeys() == 0 {
				break
			}
			k.clock.Advance(time.Second)
		}
		b.StopTimer()
	}
}
