package keystore

import (
	"context"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Stage is where a key stands within its state, stored with the record
// (Record.Stage) and indexed by every store, so that a queue reads the
// keys of its stage and nothing else: the approval resumer the approved
// and rejected keys, the re-run worker the granted ones.
//
// The stage is not a second source of truth: StageOf computes it from the
// fields the Decide functions read (PhaseOf for a parked key, the last
// history entry for a failed one), and each store sets it with StageOf in
// the one function that writes a record (keystore/bolt encodeRecordBody,
// keystore/postgres queueRecord), so no write path, decided here or in a
// store (bulk, sweep), can leave it behind. Data written before the stage
// existed gets it the same way: bolt computes it when it reads an old
// record and builds its index once; PostgreSQL's migration 0020 computes
// it in SQL by the same rules (guard_key_stage).
type Stage string

// The stages of a failed, retryable key whose execution met a re-run gate
// (rerun.go), read off its last history entry that is not an
// acknowledgement.
const (
	// StageAtGate: the execution waits at its re-run gate; no person has
	// allowed a re-run yet (RerunHolder).
	StageAtGate Stage = "at_gate"
	// StageGranted: a person allowed the re-run; no guard asked n8n yet.
	StageGranted Stage = "granted"
	// StageStarting: a guard claimed the re-run and asks n8n.
	StageStarting Stage = "starting"
	// StageStarted: n8n started the re-run; its gate has not reserved the
	// key yet.
	StageStarted Stage = "started"
	// StageRefused: n8n (or the guard) refused the re-run; the execution
	// still waits at its gate, and a person may allow it again.
	StageRefused Stage = "refused"
)

// Stages lists every stored stage ("" is none), for indexes and checks.
var Stages = []Stage{PhaseWaiting, PhaseClaimed, PhaseResumed, PhaseLost, PhaseAwaitingApproval, PhaseApproved, PhaseRejected,
	StageAtGate, StageGranted, StageStarting, StageStarted, StageRefused}

// StageOf is the stage of r: its parked phase (PhaseOf; a probe is
// claimed), its re-run stage when it is failed and retryable, "" else.
func StageOf(r *Record) Stage {
	if r == nil {
		return ""
	}
	switch r.State {
	case StateParked:
		return PhaseOf(r)
	case StateFailed:
		return rerunStage(r)
	}
	return ""
}

// rerunStage reads the re-run stage of a failed key off its last history
// entry, as RerunHolder and RerunGranted do.
func rerunStage(r *Record) Stage {
	if !r.Retryable {
		return ""
	}
	switch lastEvent(r) {
	case HistoryRerunGate:
		return StageAtGate
	case HistoryRerunGranted:
		return StageGranted
	case HistoryRerunStarting:
		return StageStarting
	case HistoryRerunStarted:
		return StageStarted
	case HistoryRerunRefused:
		return StageRefused
	}
	return ""
}

// ValidStage reports whether s is a stored stage.
func ValidStage(s Stage) bool {
	for _, v := range Stages {
		if v == s {
			return true
		}
	}
	return false
}

// StageQuery asks for the keys of one stage, in the order of their
// namespace and key (a cursor, not an age: a queue sorts what it reads).
type StageQuery struct {
	Stage     Stage
	Namespace string // "" : every namespace
	Limit     int    // 1..1000, default 100
	// After continues a listing: the namespace and key of the last item
	// of the previous page.
	AfterNamespace, AfterKey string
}

// Normalize checks the stage and the namespace and applies the limits.
func (q StageQuery) Normalize() (StageQuery, error) {
	if !ValidStage(q.Stage) {
		return q, errs.InvalidField("stage", "oneof", "stage must be one of the stored stages (waiting, claimed, resumed, lost, awaiting_approval, approved, rejected, at_gate, granted, starting, started, refused)")
	}
	if q.Namespace != "" {
		if err := CheckNamespace("namespace", q.Namespace); err != nil {
			return q, err
		}
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	q.Limit = min(q.Limit, 1000)
	return q, nil
}

// StageReader is the part of Store that reads keys by stage from the
// stage index; storetest checks it on every store.
type StageReader interface {
	// KeysAtStage lists the keys whose stored stage is q.Stage (in
	// q.Namespace), by namespace and key, after the cursor.
	KeysAtStage(ctx context.Context, q StageQuery) ([]*Record, error)
}
