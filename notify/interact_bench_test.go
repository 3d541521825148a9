package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/n8n-guard/n8n-guard/notify"
)

// BenchmarkInteraction is the part of a click Slack waits for (it wants
// an answer within 3 s): the signature check, the replay guard, the
// payload's parsing and the hand-off. The decision itself runs after the
// answer (it is waited for here, so its cost is counted too).
func BenchmarkInteraction(b *testing.B) {
	cfg := testConfig()
	h := newHarness(b, nil, cfg)
	a := h.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "1"))
	ctx := context.Background()
	reqs := make([]struct {
		hdr  map[string][]string
		body []byte
	}, b.N)
	for i := range reqs {
		p := blockAction("U0ORDERS", ActionAck, a.NotificationID)
		p["trigger_id"] = fmt.Sprint(i) // each request signed once
		hdr, body := signed(signingSecret, time.Now(), p)
		reqs[i].hdr, reqs[i].body = hdr, body
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range reqs {
		if err := h.in.Interaction(ctx, reqs[i].hdr, reqs[i].body); err != nil {
			b.Fatal(err)
		}
		h.waitClicks()
	}
}
