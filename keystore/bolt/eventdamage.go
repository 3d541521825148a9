package bolt

import (
	"encoding/binary"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// An event whose stored value cannot be decoded is skipped by every read
// of the event log (notify's intake, the audit), so one damaged event
// never holds back the events after it; the store says so once per
// process, as of a damaged record (a log line and Observer.RecordDamaged).
// Nothing of it can be trusted, so no event is written about it: it has
// no namespace whose owner could be told.

// readEvent decodes the event stored at k; ok false: it is damaged (noted).
func (s *Store) readEvent(k, v []byte) (ev keystore.Event, ok bool) {
	ev, err := decodeEvent(binary.BigEndian.Uint64(k), v)
	if err != nil {
		if s.firstDamage(err.Error()) {
			s.log.Error("store: an event of the event log cannot be read; notify and the audit skip it, and the sweep removes it with the events written after it", "path", s.path, "err", err)
		}
		return keystore.Event{}, false
	}
	return ev, true
}

// eventAt is when the event at k was written, for the sweep. A damaged
// event's own time cannot be read: it takes the time of the first intact
// event after it, which was written no earlier, so it is removed with
// that event and never before it; ok false: no intact event follows yet,
// and it is kept.
func (s *Store) eventAt(tx *bbolt.Tx, k []byte) (at time.Time, ok bool) {
	c := tx.Bucket(bucketEvents).Cursor()
	for k, v := c.Seek(k); k != nil; k, v = c.Next() {
		if ev, ok := s.readEvent(k, v); ok {
			return ev.At, true
		}
	}
	return time.Time{}, false
}
