package bolt

import (
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// A restored older store is noticed. bbolt counts its commits (the txid
// of the meta page): the file's generation. The marker beside the file
// (<path>.id), where a restore of the store file does not reach, keeps the
// last generation this data folder served: written at every start, within
// a second of any commit (keepGeneration) and at Close. A store file whose
// generation is below the marker's is older than what this folder served:
// a backup restored in place, which has lost every change after it, and
// whose keys finished after the backup would be accepted again. The start
// refuses it, naming both generations, unless Options.AcceptRestore says a
// person chose it; then the restore is logged with what it lost.
//
// What this cannot see: a restore within a second of the last commit
// before a crash (the marker had not caught up), and a restore together
// with its marker (a whole data folder copied back). The runbook says so.

// generation is the commit counter of the file's newest meta page.
func generation(db *bbolt.DB) (gen uint64, err error) {
	err = db.View(func(tx *bbolt.Tx) error {
		gen = uint64(tx.ID())
		return nil
	})
	return gen, err
}

// checkRestore refuses a file older than the marker's generation, unless
// opts.AcceptRestore; accepted, it logs the restore.
func checkRestore(db *bbolt.DB, path, marker string, markerGen uint64, opts Options) error {
	if marker == "" || markerGen == 0 {
		return nil
	}
	var id string
	if err := db.View(func(tx *bbolt.Tx) error {
		id = string(bucketValue(tx, bucketMeta, metaID))
		return nil
	}); err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	gen, err := generation(db)
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	if id != marker || gen >= markerGen {
		return nil
	}
	newest := newestWrite(db)
	if !opts.AcceptRestore {
		return fmt.Errorf("store %s: the file is older than the one this data folder served: it is at commit %d, but %s says commit %d was served (a backup restored in place?; its newest write is from %s). "+
			"Every change after the backup is lost, and keys finished after it would be accepted again. "+
			"If you restored it on purpose, start once with --accept-restore (docs/runbooks.md, \"Restoring a backup\"); otherwise put the newer file back",
			path, gen, markerPath(path), markerGen, newest)
	}
	opts.Logger.Warn("store: started on a restored older store (--accept-restore); changes after its newest write are lost and keys finished after it may be accepted again",
		"path", path, "file_commit", gen, "served_commit", markerGen, "commits_lost", markerGen-gen, "newest_write", newest)
	return nil
}

// newestWrite is the time of the newest record update in the file, about
// when the backup was taken: the keys finished after it are the ones a
// restore lost. It reads every record: only for a restore.
func newestWrite(db *bbolt.DB) string {
	var newest time.Time
	_ = db.View(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketKeys)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			ns, key := splitRecordKey(k)
			body, ok := openSeal(k, v)
			if !ok {
				body = v // a schema-1 file, not upgraded yet
			}
			if r, err := decodeRecordBody(ns, key, body); err == nil && r.UpdatedAt.After(newest) {
				newest = r.UpdatedAt
			}
			return nil
		})
	})
	if newest.IsZero() {
		return "unknown (no records)"
	}
	return newest.UTC().Format(time.RFC3339)
}

// generationEvery is how often keepGeneration writes a newer generation
// into the marker.
const generationEvery = time.Second

// keepGeneration writes the file's generation into the marker within a
// second of a commit, until stop is closed.
func (s *Store) keepGeneration(id string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(generationEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.saveGeneration(id)
		}
	}
}

// saveGeneration writes the file's generation into the marker if it moved.
func (s *Store) saveGeneration(id string) {
	gen, err := generation(s.db.Load())
	if err != nil || gen <= s.savedGen.Load() {
		return
	}
	if err := writeMarker(s.path, id, gen); err != nil {
		s.log.Warn("store: writing the commit counter into the marker failed; a restore of an older file may go unnoticed until it works", "path", markerPath(s.path), "err", err)
		return
	}
	s.savedGen.Store(gen)
}
