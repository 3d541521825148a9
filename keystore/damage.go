package keystore

import (
	"errors"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
)

// A record that fails its checksum is never decided on: its key answers
// record_damaged and nothing is written over it. Everything that walks
// many records (the listings, the catch-up's queue, the keys held for a
// check, the sweep) skips it and goes on, so one damaged record never
// holds back another key; the store reports it once per process: a log
// line, a metric, and an EventRecordDamaged for the namespace's owner.

// DamagedRunbook is the runbook section about a damaged record.
const DamagedRunbook = `docs/runbooks.md, "A key answers record_damaged"`

// EventRecordDamaged: the stored record of a key failed its checksum; its
// key answers record_damaged and is skipped everywhere until a person
// restores or repairs it (DamagedRunbook).
const EventRecordDamaged EventKind = "record_damaged"

// DamagedRecord is the error of a key whose stored record fails its
// checksum: code record_damaged (errs.CodeOf sees it), and the key, so
// whoever skips it can report which.
type DamagedRecord struct {
	Namespace, Key string
	err            *errs.Error
}

func (d *DamagedRecord) Error() string { return d.err.Error() }
func (d *DamagedRecord) Unwrap() error { return d.err }

// RecordDamaged is the answer for a key whose stored record fails its
// checksum: deciding on it could accept again a key that was finished.
func RecordDamaged(ns, key string) error {
	return &DamagedRecord{Namespace: ns, Key: key, err: errs.Errorf(errs.RecordDamaged,
		"the stored record of %s/%s is damaged (its checksum does not match): it is not decided on and nothing is written over it; see %s", ns, key, DamagedRunbook)}
}

// DamagedKey returns the key err says is damaged (ok false: err is not a
// damaged record).
func DamagedKey(err error) (ns, key string, ok bool) {
	var d *DamagedRecord
	if !errors.As(err, &d) {
		return "", "", false
	}
	return d.Namespace, d.Key, true
}

// DamagedEvent is the event a store writes, once per process, about a
// damaged record: it reaches the namespace's owner, naming the key and the
// runbook. Nothing else of the record is trusted, so nothing else is said.
func DamagedEvent(ns, key string, now time.Time) Event {
	return Event{At: now, Kind: EventRecordDamaged, Namespace: ns, Key: key,
		Message: "its stored record failed its checksum: the key answers record_damaged, is never decided on, and every listing and the catch-up skip it; look in the destination whether its write happened, then restore or repair the record (" + DamagedRunbook + ")"}
}
