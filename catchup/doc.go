// Package catchup resumes the executions parked during an outage of a
// destination (keystore/park.go) once it is back: first one, as the
// breaker's probe, then, when its complete closed the breaker, the rest,
// oldest first, at the destination's pace: the store's turn, which every
// call to n8n takes (keystore.DecideResumeTurn, pace.go).
//
// The decisions are keystore's; this package only runs them: it lists the
// parked keys, claims each in the store before calling its resume URL (so
// of several guards on one PostgreSQL exactly one calls it), calls, and
// records n8n's answer. It must never call a resume URL without holding
// the key's claim, and never again once n8n accepted the call.
package catchup
