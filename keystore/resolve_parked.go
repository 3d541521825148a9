package keystore

import (
	"github.com/n8n-guard/n8n-guard/errs"
)

// The one rule for resolving a parked key, whichever door the person
// uses (POST /v1/resolve, the CLI, the console's key page, a bulk
// decision, Slack): a resolution never leaves an n8n execution waiting in
// its Wait node without saying so.
//
//	parked, lost (n8n no longer holds the execution)         -> resolvable
//	parked, resumed (n8n accepted the resume call; the woken
//	        execution reserves again and finds the decision: duplicate_event,
//	        rejected, or a new attempt)                        -> resolvable
//	parked, waiting, claimed (a probe too), or approved and not
//	        resumed yet: the execution waits for the guard's resume call,
//	        which no guard makes once the key is decided       -> parked_waiting (409), nothing written;
//	                                                              with force: resolvable, and the history says
//	                                                              the execution was left waiting in n8n
//	awaiting approval, rejected                                -> approvals decide them (DecideResolve)
//
// The way forward the refusal names: let the catch-up wake the execution
// (the destination back, a breaker reset or a maintenance window ended: it
// then writes once, or finds a copy's write and ends Already Done); stop
// the execution in n8n, after which the guard's resume call finds it gone
// and the key lost, resolvable; or resolve with force, and stop the
// execution in n8n by hand. A bulk decision never forces: it skips these
// keys (parked_waiting).

// ResolveParked says whether a resolution may decide the parked key r now
// (nil: it may, or r is not parked). force is the person's "decide it
// anyway" (ResolveRequest.Force).
func ResolveParked(r *Record, force bool) error {
	if !waitsForResume(r) || force {
		return nil
	}
	_, exec := ExecutionOf(r.Owner)
	execution := "its n8n execution"
	if exec != "" {
		execution = "its n8n execution " + exec
	}
	return errs.Errorf(errs.ParkedWaiting, "key %q is parked and %s waits in its Wait node for the guard's resume call, which no guard makes once the key is decided; "+
		"nothing changed. Let the catch-up wake it (when destination %q is back, or after a breaker reset or the end of its maintenance window: it writes once, or ends Already Done), "+
		"or stop the execution in n8n (the guard's resume call then finds it gone and marks the key lost, which a person resolves), "+
		"or resolve with force (POST /v1/resolve with \"force\": true, the CLI's --force) and stop the execution in n8n yourself", r.Key, execution, r.Destination)
}

// waitsForResume: r is parked and its execution waits for a resume call
// no guard has had accepted yet (PhaseOf: waiting, claimed; approved and
// not resumed).
func waitsForResume(r *Record) bool {
	switch PhaseOf(r) {
	case PhaseWaiting, PhaseClaimed:
		return true
	case PhaseApproved:
		return r.ResumeSentAt == nil
	}
	return false
}

// leftWaiting is what a forced resolution of a key whose execution
// waits adds to its history entry: that execution was not ended.
func leftWaiting(r *Record) string {
	if !waitsForResume(r) {
		return ""
	}
	who := r.Owner
	if who == "" {
		who = "its execution"
	}
	return "forced: " + who + " was left waiting in n8n (stop it there); "
}
