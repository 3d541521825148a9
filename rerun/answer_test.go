package rerun_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// strictWrites is a store whose notes fail on an ended context, as
// database/sql's (so PostgreSQL's) do; bbolt writes regardless.
type strictWrites struct{ keystore.Store }

func (s strictWrites) NoteRerun(ctx context.Context, ns, key string, event keystore.HistoryEvent, detail string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return s.Store.NoteRerun(ctx, ns, key, event, detail)
}

// answersThenStops is an n8n that answers a retry as the guard is told
// to stop (SIGTERM): the guard's context ends the moment n8n answered.
type answersThenStops struct {
	stop   context.CancelFunc
	answer func(keys []rerun.Key) (rerun.Retried, error)
}

func (f answersThenStops) Retry(_ context.Context, _, _ string, keys []rerun.Key, _ time.Time) (rerun.Retried, error) {
	f.stop()
	return f.answer(keys)
}

// n8n's answer is noted on the keys although the guard stops the moment
// n8n gave it: a started re-run lost would be asked again (a second retry
// of one grant, unless n8n's earlier run is found), a refusal lost would
// leave the person who allowed it untold.
func TestN8nsAnswerIsNotedWhenTheGuardStopsAsItComes(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(keys []rerun.Key) (rerun.Retried, error)
		want   map[string]keystore.HistoryEvent
	}{
		{"started", func([]rerun.Key) (rerun.Retried, error) { return rerun.Retried{ID: "new-41"}, nil },
			map[string]keystore.HistoryEvent{"own": keystore.HistoryRerunStarted, "own-2": keystore.HistoryRerunStarted}},
		{"found started by an earlier ask", func([]rerun.Key) (rerun.Retried, error) { return rerun.Retried{ID: "new-41", Earlier: true}, nil },
			map[string]keystore.HistoryEvent{"own": keystore.HistoryRerunStarted, "own-2": keystore.HistoryRerunStarted}},
		{"refused by n8n", func([]rerun.Key) (rerun.Retried, error) {
			return rerun.Retried{}, &rerun.Refused{Status: 404, Message: "The execution does not exist."}
		}, map[string]keystore.HistoryEvent{"own": keystore.HistoryRerunRefused, "own-2": keystore.HistoryRerunRefused}},
		{"a key the execution did not reserve", func(keys []rerun.Key) (rerun.Retried, error) {
			return rerun.Retried{ID: "new-41", NotOwn: []rerun.Key{{Namespace: "crm", Key: "own-2"}}, Why: "not reserved by 41"}, nil
		}, map[string]keystore.HistoryEvent{"own": keystore.HistoryRerunStarted, "own-2": keystore.HistoryRerunRefused}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := setup(t)
			e.atGate("own", "41", "crm")
			e.atGate("own-2", "41", "crm")
			e.grant("own")
			ctx, stop := context.WithCancel(e.ctx)
			defer stop()
			r, err := rerun.New(strictWrites{e.store}, answersThenStops{stop: stop, answer: c.answer},
				rerun.Options{Reads: -1, Pace: time.Millisecond, Interval: time.Hour, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			rerun.Round(ctx, r)
			for key, want := range c.want {
				if l := e.last(key); l.Event != want {
					t.Errorf("%s after n8n answered and the guard stopped: %+v, want %s", key, l, want)
				}
			}
		})
	}
}
