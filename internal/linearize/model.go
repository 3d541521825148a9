package linearize

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// ClockMargin widens every lease bound: the server truncates a lease to
// milliseconds and reads its own clock (or the database's) between the
// client's two readings of the same machine's clock.
const ClockMargin int64 = 50e6

// State is one key as the model knows it. It is a comparable value, so
// Porcupine's default equality and merge work on it.
type State struct {
	St        string
	Attempt   int
	Retryable bool
	Reason    string // of the last failure (a fail repeated with it is a replay)
	ReqID     string // request_id of the reserve that started the live attempt
	Expired   bool   // the current lease is known to have run out
	// ExpLo and ExpHi bound when the current lease runs out.
	ExpLo, ExpHi int64
	// Since is the earliest the present can be: a lease was seen run out,
	// so no later operation can have ended before it could run out. Without
	// it an unanswered operation (open to the end of time) could see a
	// lease run out on behalf of operations that ended long before.
	Since int64
}

// Model is the model of one key; histories given to it must hold the
// operations of one key only (Check partitions them).
var Model = porcupine.NondeterministicModel{
	Init:              func() []any { return []any{State{St: StAbsent}} },
	Step:              func(s, in, out any) []any { return step(s.(State), in.(Input), out.(Output)) },
	DescribeOperation: func(in, out any) string { return describe(in.(Input), out.(Output)) },
	DescribeState:     func(s any) string { return describeState(s.(State)) },
}

func step(s State, in Input, out Output) []any {
	var next []any
	for _, pre := range clockOutcomes(s, in) {
		if in.Return < pre.Since {
			continue // in was over before the present
		}
		got, after := apply(pre, in)
		switch {
		case out.Unknown:
			// Took effect, or never did.
			next = append(next, after, pre)
		case matches(got, out):
			next = append(next, after)
		}
	}
	return next
}

// clockOutcomes are the states the key may be in when in takes effect: a
// reserved key's lease may be live (if in started before the latest
// moment it can run out), run out (if in ended after the earliest), and
// in a namespace without reclaim the sweeper may have made the key unknown.
func clockOutcomes(s State, in Input) []State {
	if s.St != StReserved {
		return []State{s}
	}
	var pre []State
	if !s.Expired && max(in.Call, s.Since) < s.ExpHi {
		pre = append(pre, s)
	}
	if s.Expired || in.Return > s.ExpLo {
		gone := s
		gone.Expired, gone.Since = true, max(s.Since, s.ExpLo)
		pre = append(pre, gone)
		if !in.Reclaim {
			pre = append(pre, swept(gone))
		}
	}
	return pre
}

// swept is a key whose lease ran out and was moved to unknown.
func swept(s State) State {
	s.St, s.Reason, s.Retryable, s.Expired, s.ExpLo, s.ExpHi, s.ReqID = StUnknown, reasonLeaseGone, false, false, 0, 0, ""
	return s
}

// apply is the deterministic rule of in on the key in state s (whose
// lease, if any, is live unless s.Expired): the answer and the next state.
func apply(s State, in Input) (Output, State) {
	answer := func(outcome string, n State) (Output, State) {
		return Output{Outcome: outcome, State: n.St, Attempt: n.Attempt}, n
	}
	problem := func(code string) (Output, State) { return Output{Outcome: code}, s }
	switch in.Kind {
	case Lookup:
		return Output{Outcome: OutRecord, State: s.St, Attempt: s.Attempt}, s
	case Reserve:
		switch s.St {
		case StAbsent:
			return answer(OutAccepted, start(s, in))
		case StReserved:
			if !s.Expired {
				if in.ReqID != "" && in.ReqID == s.ReqID {
					o, n := answer(OutAccepted, s)
					o.Repeat = true
					return o, n
				}
				return answer(OutInProgress, s)
			}
			if in.Reclaim {
				return answer(OutAccepted, start(s, in))
			}
			return answer(OutStateUnknown, swept(s))
		case StCompleted:
			return answer(OutDuplicate, s)
		case StFailed:
			if s.Retryable {
				return answer(OutAccepted, start(s, in))
			}
			return answer(OutRejected, s)
		case StUnknown:
			return answer(OutStateUnknown, s)
		}
	case Complete, Fail:
		if s.St == StAbsent {
			return problem(OutNotFound)
		}
		if in.Attempt != s.Attempt {
			return problem(OutStale) // the fencing rule
		}
		if in.Kind == Complete {
			switch s.St {
			case StCompleted:
				return answer(OutCompleted, s)
			case StFailed:
				return problem(OutConflict)
			}
			n := s
			n.St, n.Reason, n.Retryable = StCompleted, "", false
			return answer(OutCompleted, settled(n))
		}
		toUnknown, retryable := in.Reason == reasonUnknown, in.Reason != reasonValidation
		outcome := OutDestFailed
		switch {
		case toUnknown:
			outcome, retryable = OutStateUnknown, false
		case !retryable:
			outcome = OutRejected
		}
		switch s.St {
		case StCompleted:
			return problem(OutConflict)
		case StFailed:
			if !toUnknown && s.Reason == in.Reason && s.Retryable == retryable {
				return answer(outcome, s)
			}
			return problem(OutConflict)
		case StUnknown:
			if toUnknown {
				return answer(outcome, s)
			}
		}
		n := s
		n.St, n.Reason, n.Retryable = StFailed, in.Reason, retryable
		if toUnknown {
			n.St = StUnknown
		}
		return answer(outcome, settled(n))
	case Resolve:
		switch s.St {
		case StAbsent:
			return problem(OutNotFound)
		case StCompleted:
			if in.Resolution == StCompleted {
				return answer(OutCompleted, s)
			}
			return problem(OutConflict)
		case StReserved:
			if !s.Expired {
				return problem(OutConflict) // a live lease, and no force
			}
		}
		n := settled(s)
		if in.Resolution == StCompleted {
			n.St, n.Reason, n.Retryable = StCompleted, "", false
			return answer(OutCompleted, n)
		}
		n.St, n.Retryable = StFailed, true
		return answer(OutFailed, n)
	}
	panic(fmt.Sprintf("linearize: no rule for %s on a %s key", in.Kind, s.St))
}

// start is a new attempt begun by the reserve in; its lease runs out
// between the earliest and the latest moment the server can have read its
// clock, plus the lease.
func start(s State, in Input) State {
	return State{St: StReserved, Attempt: s.Attempt + 1, ReqID: in.ReqID, Since: s.Since,
		ExpLo: in.Call + in.Lease - ClockMargin, ExpHi: addSat(in.Return, in.Lease+ClockMargin)}
}

// settled is s without a lease.
func settled(s State) State {
	s.ReqID, s.Expired, s.ExpLo, s.ExpHi = "", false, 0, 0
	return s
}

func addSat(a, b int64) int64 {
	if a > Open-b {
		return Open
	}
	return a + b
}

// matches tells whether the model's answer is the one recorded. A record
// the answer carried must agree in state and attempt.
func matches(model, got Output) bool {
	if model.Outcome != got.Outcome || model.Repeat != got.Repeat {
		return false
	}
	if got.State != "" && model.State != "" && got.State != model.State {
		return false
	}
	return got.Attempt == 0 || model.Attempt == got.Attempt
}

func describe(in Input, out Output) string {
	var call string
	switch in.Kind {
	case Reserve:
		call = fmt.Sprintf("reserve(%s)", in.ReqID)
	case Complete:
		call = fmt.Sprintf("complete(#%d)", in.Attempt)
	case Fail:
		call = fmt.Sprintf("fail(#%d, %s)", in.Attempt, in.Reason)
	case Resolve:
		call = fmt.Sprintf("resolve(%s)", in.Resolution)
	default:
		call = string(in.Kind) + "()"
	}
	if out.Unknown {
		return call + " -> ?"
	}
	res := out.Outcome
	if out.State != "" {
		res += " " + out.State
	}
	if out.Attempt != 0 {
		res += fmt.Sprintf(" #%d", out.Attempt)
	}
	if out.Repeat {
		res += " (repeat)"
	}
	return call + " -> " + res
}

func describeState(s State) string {
	d := fmt.Sprintf("%s #%d", s.St, s.Attempt)
	if s.St == StFailed && !s.Retryable {
		d += " final"
	}
	if s.Expired {
		d += " (lease run out)"
	}
	return d
}
