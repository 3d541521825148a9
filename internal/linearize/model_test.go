package linearize

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const sec = int64(time.Second)

// h builds hand-made histories of one key "k": times are in seconds.
type h struct{ ops []porcupine.Operation }

func (b *h) add(client int, in Input, out Output, call, ret float64) *h {
	in.Key = "k"
	if in.Kind == Reserve && in.Lease == 0 {
		in.Lease = 10 * sec
	}
	b.ops = append(b.ops, Op(client, in, out, int64(call*float64(sec)), int64(ret*float64(sec))))
	return b
}

func res(req string, reclaim bool) Input {
	return Input{Kind: Reserve, ReqID: req, Reclaim: reclaim}
}
func accepted(a int) Output { return Output{Outcome: OutAccepted, State: StReserved, Attempt: a} }
func outcome(o, st string, a int) Output {
	return Output{Outcome: o, State: st, Attempt: a}
}

var unknown = Output{Unknown: true}

func TestModel(t *testing.T) {
	cases := []struct {
		name string
		h    *h
		ok   bool
	}{
		{"two copies at once, one accepted", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(1, res("b", false), outcome(OutInProgress, StReserved, 1), 0, 1), true},
		{"two accepted reserves of one key with no expiry possible in between", new(h).
			add(0, res("a", true), accepted(1), 0, 1).
			add(1, res("b", true), accepted(2), 2, 3), false},
		{"two accepted attempt 1", new(h).
			add(0, res("a", true), accepted(1), 0, 1).
			add(1, res("b", true), accepted(1), 0, 1), false},
		{"reclaim after the lease ran out", new(h).
			add(0, res("a", true), accepted(1), 0, 1).
			add(1, res("b", true), accepted(2), 12, 13), true},
		{"an unanswered reserve cannot make a lease run out early", new(h).
			add(0, res("a", true), accepted(1), 0, 1).
			add(2, res("c", true), unknown, 2, 3).
			add(1, res("b", true), accepted(2), 2, 3), false},
		{"a live lease is not reclaimed even if the reserve came late", new(h).
			add(0, res("a", true), accepted(1), 0, 1).
			add(1, res("b", true), accepted(2), 5, 9), false},
		{"expiry to unknown, no reclaim", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(1, res("b", false), outcome(OutStateUnknown, StUnknown, 1), 12, 13).
			add(0, Input{Kind: Complete, Attempt: 1}, outcome(OutCompleted, StCompleted, 1), 14, 15), true},
		{"the sweeper may have moved an expired key to unknown", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(1, Input{Kind: Lookup}, outcome(OutRecord, StUnknown, 1), 20, 21), true},
		{"but not before its lease can run out", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(1, Input{Kind: Lookup}, outcome(OutRecord, StUnknown, 1), 2, 3), false},
		{"fencing: the superseded token is stale", new(h).
			add(0, res("a", true), accepted(1), 0, 1).
			add(1, res("b", true), accepted(2), 12, 13).
			add(0, Input{Kind: Complete, Attempt: 1}, Output{Outcome: OutStale}, 14, 15), true},
		{"fencing broken: the superseded token completes", new(h).
			add(0, res("a", true), accepted(1), 0, 1).
			add(1, res("b", true), accepted(2), 12, 13).
			add(0, Input{Kind: Complete, Attempt: 1}, outcome(OutCompleted, StCompleted, 2), 14, 15), false},
		{"a repeat with the same request_id gets the token again", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(0, res("a", false), Output{Outcome: OutAccepted, State: StReserved, Attempt: 1, Repeat: true}, 2, 3), true},
		{"a copy with another request_id does not", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(1, res("b", false), Output{Outcome: OutAccepted, State: StReserved, Attempt: 1, Repeat: true}, 2, 3), false},
		{"an unanswered reserve may have taken effect", new(h).
			add(0, res("a", false), unknown, 0, 1).
			add(1, res("b", false), outcome(OutInProgress, StReserved, 1), 2, 3), true},
		{"or not", new(h).
			add(0, res("a", false), unknown, 0, 1).
			add(1, res("b", false), accepted(1), 2, 3), true},
		{"an acknowledged complete is lost", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(0, Input{Kind: Complete, Attempt: 1}, outcome(OutCompleted, StCompleted, 1), 1, 2).
			add(1, Input{Kind: Lookup}, outcome(OutRecord, StReserved, 1), 3, 4), false},
		{"an acknowledged reserve is lost", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(1, Input{Kind: Lookup}, outcome(OutRecord, StAbsent, 0), 3, 4), false},
		{"retryable failure, then a new attempt", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(0, Input{Kind: Fail, Attempt: 1, Reason: "destination_failed"}, outcome(OutDestFailed, StFailed, 1), 1, 2).
			add(1, res("b", false), accepted(2), 3, 4).
			add(0, Input{Kind: Fail, Attempt: 1, Reason: "destination_failed"}, Output{Outcome: OutStale}, 5, 6), true},
		{"final failure rejects", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(0, Input{Kind: Fail, Attempt: 1, Reason: "validation_failed"}, outcome(OutRejected, StFailed, 1), 1, 2).
			add(1, res("b", false), outcome(OutRejected, StFailed, 1), 3, 4).
			add(2, Input{Kind: Resolve, Resolution: StFailed}, outcome(OutFailed, StFailed, 1), 5, 6).
			add(1, res("c", false), accepted(2), 7, 8), true},
		{"resolve refuses a live lease", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(2, Input{Kind: Resolve, Resolution: StCompleted}, Output{Outcome: OutConflict}, 2, 3).
			add(0, Input{Kind: Complete, Attempt: 1}, outcome(OutCompleted, StCompleted, 1), 3, 4).
			add(1, res("b", false), outcome(OutDuplicate, StCompleted, 1), 5, 6), true},
		{"complete after fail is a conflict", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(0, Input{Kind: Fail, Attempt: 1, Reason: "destination_failed"}, outcome(OutDestFailed, StFailed, 1), 1, 2).
			add(0, Input{Kind: Complete, Attempt: 1}, outcome(OutCompleted, StCompleted, 1), 3, 4), false},
		{"concurrent complete and fail: either order", new(h).
			add(0, res("a", false), accepted(1), 0, 1).
			add(0, Input{Kind: Complete, Attempt: 1}, outcome(OutCompleted, StCompleted, 1), 2, 5).
			add(1, Input{Kind: Fail, Attempt: 1, Reason: "destination_failed"}, Output{Outcome: OutConflict}, 2, 5), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Check(c.h.ops, 10*time.Second, "")
			if got := len(r.Illegal) == 0; got != c.ok || len(r.TimedOut) > 0 {
				t.Fatalf("linearizable = %v, want %v (timed out: %v)", got, c.ok, r.TimedOut)
			}
		})
	}
}

// A failure leaves Porcupine's visualisation of the offending key.
func TestCheckWritesVisualisation(t *testing.T) {
	dir := t.TempDir()
	b := new(h).
		add(0, res("a", true), accepted(1), 0, 1).
		add(1, res("b", true), accepted(2), 2, 3).
		add(2, res("c", true), unknown, 2, 3)
	r := Check(b.ops, 10*time.Second, dir)
	if len(r.Illegal) != 1 || r.Illegal[0].HTML != filepath.Join(dir, "linearize-k.html") {
		t.Fatalf("report %+v", r)
	}
	if fi, err := os.Stat(r.Illegal[0].HTML); err != nil || fi.Size() == 0 {
		t.Fatalf("visualisation: %v", err)
	}
}

// Evidence names the shortest prefix no order explains: here the second
// accepted reserve, not the lookups that follow it.
func TestEvidenceIsTheShortestFailingPrefix(t *testing.T) {
	b := new(h).
		add(0, res("a", true), accepted(1), 0, 1).
		add(1, res("b", true), accepted(2), 2, 3).
		add(2, Input{Kind: Lookup}, outcome(OutRecord, StReserved, 2), 4, 5).
		add(2, Input{Kind: Lookup}, outcome(OutRecord, StReserved, 2), 6, 7)
	at, n, ok := Evidence(b.ops, 10*time.Second)
	if !ok || n != 2 || at != 3*sec {
		t.Fatalf("evidence: %d operations, at %d, %v; want the first 2, at 3 s", n, at, ok)
	}
	if _, _, ok := Evidence(b.ops[:1], 10*time.Second); ok {
		t.Fatal("a linearizable history has no evidence")
	}
}
