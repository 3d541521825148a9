package rerun_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// slowN8n answers a retry when the test says (answer), as an HTTP call
// does: an ask whose context ended gets no answer, even one n8n acted on.
type slowN8n struct {
	mu     sync.Mutex
	asks   int
	asked  chan struct{} // closed at the first ask
	answer chan struct{}
}

func (f *slowN8n) Retry(ctx context.Context, _, id string, _ []rerun.Key, _ time.Time) (rerun.Retried, error) {
	f.mu.Lock()
	if f.asks++; f.asks == 1 {
		close(f.asked)
	}
	f.mu.Unlock()
	select {
	case <-f.answer:
	case <-ctx.Done():
	}
	if err := ctx.Err(); err != nil {
		return rerun.Retried{}, errors.Join(rerun.ErrUnreachable, err) // the connection was cut: n8n may have started it
	}
	return rerun.Retried{ID: "new-" + id}, nil
}

func (f *slowN8n) count() int { f.mu.Lock(); defer f.mu.Unlock(); return f.asks }

// SIGTERM while n8n is asked to retry: n8n's answer, within the grace,
// is noted on every key of the execution, so the grant has its one retry
// and is not asked again after its claims lapse. An n8n that answers
// after the grace does not hold the stop: the ask is cut and noted as
// nothing, and its claims lapse (not handed back: n8n may have started
// the retry, which the next ask finds).
func TestAStopLetsAnAskInFlightFinishWithinItsGrace(t *testing.T) {
	for _, c := range []struct {
		name     string
		grace    time.Duration
		answered bool // n8n answers after the stop, within the grace
		want     keystore.HistoryEvent
	}{
		{"n8n answers within the grace", time.Hour, true, keystore.HistoryRerunStarted},
		{"n8n hangs past the grace", time.Millisecond, false, keystore.HistoryRerunStarting},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			e.atGate("own", "41", "crm")
			e.atGate("own-2", "41", "crm")
			e.grant("own")
			f := &slowN8n{asked: make(chan struct{}), answer: make(chan struct{})}
			var answer sync.Once
			t.Cleanup(func() { answer.Do(func() { close(f.answer) }) })
			r := newRunner(t, e, f, rerun.Options{Name: "guard-a", Grace: c.grace, Reads: -1, Pace: time.Millisecond, Interval: time.Hour})
			ctx, stop := context.WithCancel(e.ctx)
			done := make(chan struct{})
			go func() { rerun.Round(ctx, r); close(done) }()
			<-f.asked
			stop()
			if c.answered {
				answer.Do(func() { close(f.answer) })
			}
			select {
			case <-done:
			case <-time.After(testwait.Deadline):
				t.Fatal("the stop still waits for n8n's answer, past the grace")
			}
			for _, key := range []string{"own", "own-2"} {
				if l := e.last(key); l.Event != c.want {
					t.Errorf("%s after the stop: %+v, want %s", key, l, c.want)
				}
			}
			rerun.Round(e.ctx, newRunner(t, e, f, rerun.Options{Name: "guard-b", Reads: -1, Pace: time.Millisecond, Interval: time.Hour}))
			if n := f.count(); n != 1 {
				t.Fatalf("n8n was asked %d times for one grant, want once: a second guard asked again", n)
			}
		})
	}
}
