package catchup_test

import (
	"context"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
)

// timingOutN8n took the call and does not answer: the call's own
// timeout (keystore.ResumeCallTimeout, started before the stop) ends it
// when the test says, while the grace still runs.
type timingOutN8n struct {
	called  chan string
	release chan struct{}
}

func (h *timingOutN8n) Resume(_ context.Context, rec *keystore.Record) n8n.ResumeOutcome {
	h.called <- rec.Key
	<-h.release
	return n8n.ResumeOutcome{Answer: keystore.ResumeRetry, Detail: "n8n could not be reached: context deadline exceeded"}
}

// A call in flight at the stop whose own timeout ends it within the
// grace got no answer n8n acted on, yet n8n may have taken it: its claim
// is left to lapse, as that of a call the grace cut, so no second guard
// claims the key at once and calls its execution again.
func TestACallTimingOutWithinTheGraceLeavesItsClaimToLapse(t *testing.T) {
	slow := &timingOutN8n{called: make(chan string, 4), release: make(chan struct{})}
	store := stopAsN8nAnswers(t, slow, slow.called, slow.release)
	if _, ok, err := store.ClaimResume(context.Background(), ns, "evt_00", 2*time.Minute); err != nil || ok {
		t.Fatalf("a second guard claimed at once the key whose call n8n may have taken (ok=%v err=%v): it would call the execution again", ok, err)
	}
}
