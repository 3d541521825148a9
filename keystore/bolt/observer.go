package bolt

import "time"

// Observer is told what the store's writer does, for metrics (cmd/n8n-guard
// turns it into Prometheus series). Its methods run on the writer's
// goroutine, between commits (RecordDamaged and BackgroundCheckFailed also
// on readers' and the checker's): they must return at once and never call
// the store.
type Observer interface {
	// Committed: one bbolt commit returned, holding writes writes (the
	// changes of that many requests or sweep batches), after took.
	Committed(writes int, took time.Duration)
	// StorageError: the file refused a write; op says which step
	// (begin, apply, commit, ...). Every such error is also logged.
	StorageError(op string, err error)
	// SweepPaused: one sweep batch held the writer for took; requests
	// queued behind it waited that long.
	SweepPaused(took time.Duration)
	// RecordDamaged: a record failed its checksum (once per record and
	// process); every such record is also logged with its key.
	RecordDamaged()
	// BackgroundCheckFailed: the whole-file check after start found
	// damage and stopped writes (open.go); also logged.
	BackgroundCheckFailed()
}

// The steps StorageError names: n8n_guard_store_errors_total has one
// series per step from start (at 0), so an alert sees the first error.
const (
	OpBegin  = "begin a write transaction"
	OpApply  = "apply"
	OpCommit = "commit"
)

// StorageOps lists every op StorageError is called with.
func StorageOps() []string { return []string{OpBegin, OpApply, OpCommit} }

// noObserver is the Observer of a store opened without one.
type noObserver struct{}

func (noObserver) Committed(int, time.Duration) {}
func (noObserver) StorageError(string, error)   {}
func (noObserver) SweepPaused(time.Duration)    {}
func (noObserver) RecordDamaged()               {}
func (noObserver) BackgroundCheckFailed()       {}

// observer returns the store's Observer, never nil.
func (s *Store) observer() Observer {
	if s.obs == nil {
		return noObserver{}
	}
	return s.obs
}
