package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"

	bbolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/internal/durable"
)

// The log of the previous version, <path>.wal, read once and removed.
//
// Versions up to a3e635a kept answered writes in a write-ahead log beside
// the bbolt file for up to 250 ms before bbolt had them. The log is gone
// (bbolt's own commit is the only durability path now), but a store
// stopped by a crash may hold answered writes only there. So at start the
// records newer than the last commit are applied, as the previous version
// would have, in one transaction; then the log is removed and the bucket
// that tracked it dropped, with one log line saying how many records it
// carried. What cannot be read with certainty stops the start instead of
// being skipped:
//
//   - a record that is ours (the committed generation, the next seq) but
//     fails its checksum or does not parse: damaged, or torn by a crash;
//   - a missing log while the bbolt file says there was one.
//
// The log format: a zero-filled file of records
//
//	length uint32 | crc32c(generation, seq, payload) uint32 | seq uint64 | payload
//
// where the payload is a list of bucket changes (put, delete, sequence).
// Each commit drew a new generation, so records older than the last commit
// (of another generation) are never applied.

const (
	legacyHeaderLen = 16
	legacyPut       = 1
	legacyDelete    = 2
	legacySequence  = 3
)

// bucketLegacyLog is where the previous version kept the seq of the last
// record the committed file contains, and the generation of the records
// written after it.
var (
	bucketLegacyLog = []byte("wal")
	legacyApplied   = []byte("applied")
	legacyGen       = []byte("generation")
	// metaLegacyApplied, in bucket meta, says the log was applied.
	metaLegacyApplied = []byte("legacy-log-applied")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func legacyLogPath(dbPath string) string { return dbPath + ".wal" }

func legacySum(gen uint64, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(u64(gen), castagnoli), castagnoli, body)
}

type legacyRecord struct {
	seq     uint64
	payload []byte
}

var errLegacyDamaged = errors.New("damaged record")

// parseLegacyLog returns the records of generation gen that follow seq
// after, in order, from the start of buf. It stops at the first record
// that is not one of them: zeros, or a record of another generation (left
// from before the last commit). A record that claims to be the next one
// but fails its checksum is damage, and an error.
func parseLegacyLog(buf []byte, gen, after uint64) ([]legacyRecord, error) {
	var out []legacyRecord
	next := after + 1
	for off := 0; len(buf)-off >= legacyHeaderLen; {
		n := int(binary.BigEndian.Uint32(buf[off:]))
		sum := binary.BigEndian.Uint32(buf[off+4:])
		seq := binary.BigEndian.Uint64(buf[off+8:])
		if n == 0 && sum == 0 && seq == 0 {
			break // the zero-filled rest
		}
		if n == 0 || n > len(buf)-off-legacyHeaderLen {
			if seq == next {
				return nil, fmt.Errorf("record %d at offset %d: %w (length %d)", seq, off, errLegacyDamaged, n)
			}
			break
		}
		body := buf[off+8 : off+legacyHeaderLen+n] // seq, payload
		if legacySum(gen, body) != sum {
			if seq == next {
				return nil, fmt.Errorf("record %d at offset %d: %w (checksum)", seq, off, errLegacyDamaged)
			}
			break // another generation's record: written before the last commit
		}
		if seq != next {
			return nil, fmt.Errorf("record %d at offset %d follows %d: records are missing", seq, off, next-1)
		}
		out = append(out, legacyRecord{seq: seq, payload: body[8:]})
		next++
		off += legacyHeaderLen + n
	}
	return out, nil
}

// replayLegacy applies one record's changes to tx.
func replayLegacy(tx *bbolt.Tx, payload []byte) error {
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(payload)
		if w <= 0 || n > uint64(len(payload)-w) {
			return nil, false
		}
		f := payload[w : w+int(n)]
		payload = payload[w+int(n):]
		return f, true
	}
	for len(payload) > 0 {
		if len(payload) < 2 || int(payload[1]) >= len(allBuckets) {
			return errLegacyDamaged
		}
		kind, b := payload[0], bucketFor(tx, int(payload[1]))
		payload = payload[2:]
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return errLegacyDamaged
		}
		var err error
		switch kind {
		case legacyPut:
			err = b.Put(k, v)
		case legacyDelete:
			err = b.Delete(k)
		case legacySequence:
			if len(v) != 8 {
				return errLegacyDamaged
			}
			err = b.SetSequence(binary.BigEndian.Uint64(v))
		default:
			return errLegacyDamaged
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// migrateLegacyLog applies the previous version's log, if any, and removes
// it.
func migrateLegacyLog(db *bbolt.DB, path string, log *slog.Logger) error {
	logPath := legacyLogPath(path)
	buf, err := os.ReadFile(logPath)
	missing := errors.Is(err, os.ErrNotExist)
	if err != nil && !missing {
		return fmt.Errorf("store %s: read the previous version's log: %w", path, err)
	}
	replayed := 0
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLegacyLog)
		if b == nil {
			switch {
			case missing:
				return nil
			case tx.Bucket(bucketMeta).Get(metaLegacyApplied) != nil:
				return nil // applied by an earlier start that stopped before removing it
			}
			return fmt.Errorf("%s exists, but this store file never had a log: it belongs to another store file; move it away to start", filepath.Base(logPath))
		}
		if missing {
			return fmt.Errorf("%s, the previous version's log, is missing: answered writes may have been only there. Put it back beside the store file; if the previous version was shut down normally (not killed, no crash), nothing is in it: create it empty (touch %s) to go on", filepath.Base(logPath), logPath)
		}
		var applied, gen uint64
		if v := b.Get(legacyApplied); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		if v := b.Get(legacyGen); len(v) == 8 {
			gen = binary.BigEndian.Uint64(v)
		}
		recs, err := parseLegacyLog(buf, gen, applied)
		if err != nil {
			return fmt.Errorf("the previous version's log %s: %w; %s", filepath.Base(logPath), err, theWayOut(path))
		}
		for _, r := range recs {
			if err := replayLegacy(tx, r.payload); err != nil {
				return fmt.Errorf("the previous version's log %s: record %d: %w; %s", filepath.Base(logPath), r.seq, err, theWayOut(path))
			}
			replayed++
		}
		if err := tx.Bucket(bucketMeta).Put(metaLegacyApplied, u64(uint64(replayed))); err != nil {
			return err
		}
		return tx.DeleteBucket(bucketLegacyLog)
	})
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	if missing {
		return nil
	}
	// The records are committed to the store file: the log can go.
	if err := os.Remove(logPath); err != nil {
		return fmt.Errorf("store %s: remove the previous version's log: %w", path, err)
	}
	if err := durable.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	log.Info("store: applied and removed the previous version's log", "path", logPath, "records", replayed)
	return nil
}
