package keystore

import (
	"testing"
	"time"
)

// DecideParkedOverdue in every state a key can be in when the runner
// finds it: one report per parked attempt, and only over the limit.
func TestDecideParkedOverdue(t *testing.T) {
	parkedAt := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	limit := 72 * time.Hour
	over, under := parkedAt.Add(limit), parkedAt.Add(limit-time.Second)
	parked := func() *Record {
		p := parkedAt
		return &Record{Namespace: "ns", Key: "k", State: StateParked, Attempt: 2, Destination: "crm", ParkedAt: &p,
			History: []Transition{{At: parkedAt, Event: HistoryParked, Attempt: 2}}}
	}
	for _, c := range []struct {
		name   string
		cur    func() *Record
		now    time.Time
		report bool
	}{
		{"no such key", func() *Record { return nil }, over, false},
		{"reserved (resumed meanwhile)", func() *Record { r := parked(); r.State = StateReserved; return r }, over, false},
		{"parked, under the limit", parked, under, false},
		{"parked, at the limit", parked, over, true},
		{"parked, reported already", func() *Record {
			r := parked()
			r.History = append(r.History, Transition{At: over, Event: HistoryParkedOverdue})
			return r
		}, over.Add(time.Hour), false},
		{"parked again after an earlier report", func() *Record {
			r := parked()
			r.History = append([]Transition{{At: parkedAt.Add(-time.Hour), Event: HistoryParkedOverdue}}, r.History...)
			return r
		}, over, true},
		{"parked again since the runner looked", func() *Record { r := parked(); p := parkedAt.Add(time.Minute); r.ParkedAt = &p; return r }, over, false},
		{"lost in n8n", func() *Record { r := parked(); r.Reason = ReasonResumeLost; return r }, over, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cur := c.cur()
			st, ok := DecideParkedOverdue(cur, parkedAt, limit, c.now)
			if ok != c.report {
				t.Fatalf("reported %v, want %v", ok, c.report)
			}
			if !ok {
				if st.Record != nil || len(st.Events) != 0 {
					t.Fatalf("nothing to report, but a step %+v", st)
				}
				return
			}
			if len(st.Events) != 1 || st.Events[0].Kind != EventParkedOverdue || st.Events[0].Key != "k" || st.Events[0].Attempt != 2 || st.Events[0].Destination != "crm" {
				t.Fatalf("events %+v", st.Events)
			}
			if h := st.Record.History; h[len(h)-1].Event != HistoryParkedOverdue || len(cur.History) == len(h) {
				t.Fatalf("history %+v (the stored one: %+v)", h, cur.History)
			}
			if st.Record.State != StateParked {
				t.Fatalf("state %s", st.Record.State)
			}
		})
	}
}
