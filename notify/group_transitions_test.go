package notify

import (
	"strings"
	"testing"
	"time"
)

// The transitions of a group of stuck keys (group.go), state by event,
// like the table tests of transitions_test.go.

// keyGroup is a delivered message about count keys, settled of them
// decided, shown at created and not due.
func keyGroup(count, settled int) *Record {
	r := delivered()
	r.Kind, r.Count, r.Settled, r.DueAt, r.ShownCount = KindKeyUnknown, count, settled, time.Time{}, count
	r.KeyPayload = KeyPayload{Namespace: "ns", Key: "k1", KeyAttempt: 1}
	esc := at.Add(time.Hour)
	r.EscalateAt = &esc
	return r
}

func TestKeySettled(t *testing.T) {
	cases := []struct {
		name          string
		cur           *Record
		settled       int
		due           time.Duration // from at; -1: not due
		version       int           // added
		escalationEnd bool
		decision      string
	}{
		{"group of 3, first key decided", keyGroup(3, 0), 1, policy.GroupWindow/2 - time.Minute, 0, false, ""},
		{"group of 3, second key decided, an update due already", func() *Record { r := keyGroup(3, 1); r.DueAt = at; return r }(), 2, 0, 0, false, ""},
		{"group of 3, the last key decided", keyGroup(3, 2), 3, 0, 1, true, ""},
		{"group decided in Slack, the last key counted", func() *Record { r := keyGroup(3, 2); r.Decision = DecisionCompleted; return r }(), 3, 0, 1, true, DecisionCompleted},
		{"one key, decided elsewhere", keyGroup(1, 0), 1, 0, 1, true, DecisionCompleted},
		{"one key, decided in Slack before", func() *Record { r := keyGroup(1, 0); r.Decision = DecisionRetry; return r }(), 1, -1, 0, true, DecisionRetry},
		{"a key counted past the count (never more than it)", keyGroup(2, 2), 2, 0, 1, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := tc.cur.clone()
			next := keySettled(cur, true, "office manager", created, at, policy.GroupWindow)
			if next.Settled != tc.settled || next.Version != cur.Version+tc.version || next.Decision != tc.decision {
				t.Fatalf("settled %d version +%d decision %q: %+v %+v", next.Settled, next.Version-cur.Version, next.Decision, next.GroupProgress, next.Decided)
			}
			if (next.EscalateAt == nil) != tc.escalationEnd {
				t.Fatalf("escalation at %v, want ended %v", next.EscalateAt, tc.escalationEnd)
			}
			switch {
			case tc.due < 0 && !next.DueAt.Equal(cur.DueAt):
				t.Fatalf("due at %v, want no update", next.DueAt)
			case tc.due >= 0 && !next.DueAt.Equal(at.Add(tc.due)):
				t.Fatalf("due at %v, want %v", next.DueAt, at.Add(tc.due))
			}
			if cur.Settled != tc.cur.Settled {
				t.Fatal("KeySettled changed its input")
			}
		})
	}
}

func TestGroupDecided(t *testing.T) {
	cur := keyGroup(50, 5)
	next := groupDecided(cur, DecisionCompleted, "U1", "slack-n_1-1", 43, 7, at)
	if next.Decision != DecisionCompleted || next.DecidedBy != "U1" || next.BulkID != "slack-n_1-1" || next.BulkDecided != 43 ||
		next.BulkSkipped != 7 || next.Version != cur.Version+1 || !next.DueAt.Equal(at) || next.EscalateAt != nil {
		t.Fatalf("%+v %+v", next.Decided, next.GroupProgress)
	}
	if next.OpenKeys() != 45 || next.Settled != 5 {
		t.Fatal("a group decision counts keys itself: the key-resolved events count them, once each")
	}
	want := "<@U1> marked 43 keys *completed* (it happened) at "
	if got := GroupDecisionText(next); !strings.HasPrefix(got, want) || !strings.Contains(got, "(7 keys were decided elsewhere already)") {
		t.Fatalf("%q", got)
	}
}

// A key of the group decided while its message was being sent: the
// update after it shows the new count.
func TestAfterCallSeesAKeySettledDuringTheCall(t *testing.T) {
	sent := keyGroup(3, 0)
	cur := keySettled(sent, true, "ops", created, created, policy.GroupWindow)
	cur.DueAt = time.Time{} // as it was when the call began
	next, _ := afterCall(cur, sent, callResult{Update: true, Class: classOK}, at, policy)
	if next.DueAt.IsZero() {
		t.Fatal("the key settled during the call is never shown")
	}
}
