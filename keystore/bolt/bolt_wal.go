package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"

	bbolt "go.etcd.io/bbolt"
)

// The write-ahead log.
//
// A bbolt commit syncs twice (the data pages, then the meta page), and the
// first sync grows with every page the commit touched; under load the two
// took 1.5–3 ms on these machines. The writer therefore keeps one bbolt
// write transaction open across many groups of writes, and makes each group
// durable by appending what it changed to this log and syncing that append
// once. The transaction is committed every CommitInterval (or sooner, when
// a listing asks for it or the log is full); after a commit the log starts
// over from its beginning. On open, the records newer than the last commit
// are applied again.
//
// What is logged are after-images: each put, delete and bucket sequence the
// transaction made, in order. Applying them again over the last committed
// state gives exactly the state the answers were given from; they are not
// re-decided.
//
// The log is one preallocated, zero-filled file that is only overwritten,
// never extended, so fdatasync never has to journal a size change (why
// PostgreSQL zero-fills its WAL segments). A record:
//
//	length uint32 | crc32c(generation, seq, payload) uint32 | seq uint64 | payload
//
// Every commit, and every open, draws a new generation and stores it in the
// committed file; the records written until the next commit carry it in
// their checksum. Reading starts at offset 0 and stops at the first record
// that is torn, of another generation, or whose seq does not follow the
// previous one. So records older than the last commit are never applied,
// nor are the records of a later run when an older copy of the file is
// restored beside this log.

const (
	walHeaderLen = 16
	// DefaultWALSize is the size of the log file next to the bbolt file.
	DefaultWALSize = 16 << 20

	walPut      = 1
	walDelete   = 2
	walSequence = 3
)

// Bucket codes in log records. They are stored on disk: never renumber.
const (
	bkKeys     = 0
	bkState    = 1
	bkLeases   = 2
	bkExpires  = 3
	bkCounts   = 4
	bkBreakers = 5
	bkEvents   = 6
)

// bucketWAL holds the seq of the last log record the committed file
// contains.
var (
	bucketWAL  = []byte("wal")
	walApplied = []byte("applied")
	walGen     = []byte("generation") // of the records written since the last commit
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func walPath(dbPath string) string { return dbPath + ".wal" }

type walRecord struct {
	seq     uint64
	payload []byte
}

// readWAL reads the log at path (nothing when it does not exist).
func readWAL(path string) ([]byte, error) {
	buf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read log %s: %w", path, err)
	}
	return buf, nil
}

func walSum(gen uint64, body []byte) uint32 {
	return crc32.Update(crc32.Checksum(u64(gen), castagnoli), castagnoli, body)
}

// parseWAL returns the whole records of generation gen from the start of
// buf, in order.
func parseWAL(buf []byte, gen uint64) []walRecord {
	var out []walRecord
	for off := 0; len(buf)-off >= walHeaderLen; {
		n := int(binary.BigEndian.Uint32(buf[off:]))
		sum := binary.BigEndian.Uint32(buf[off+4:])
		if n == 0 || n > len(buf)-off-walHeaderLen {
			break
		}
		body := buf[off+8 : off+walHeaderLen+n] // seq, payload
		if walSum(gen, body) != sum {
			break
		}
		seq := binary.BigEndian.Uint64(body)
		if len(out) > 0 && seq != out[len(out)-1].seq+1 {
			break
		}
		out = append(out, walRecord{seq: seq, payload: body[8:]})
		off += walHeaderLen + n
	}
	return out
}

// appendWALRecord frames payload as record seq of generation gen.
func appendWALRecord(dst []byte, gen, seq uint64, payload []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start+4:], walSum(gen, dst[start+8:]))
	return dst
}

// appendWALOp logs one change of a bucket.
func appendWALOp(dst []byte, kind byte, bucket int, k, v []byte) []byte {
	dst = append(dst, kind, byte(bucket))
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

var errCorruptWAL = errors.New("corrupt log record")

// replayWAL applies one record's changes to tx.
func replayWAL(tx *bbolt.Tx, payload []byte) error {
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
			return errCorruptWAL
		}
		kind, b := payload[0], bucketFor(tx, int(payload[1]))
		payload = payload[2:]
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return errCorruptWAL
		}
		var err error
		switch kind {
		case walPut:
			err = b.Put(k, v)
		case walDelete:
			err = b.Delete(k)
		case walSequence:
			if len(v) != 8 {
				return errCorruptWAL
			}
			err = b.SetSequence(binary.BigEndian.Uint64(v))
		default:
			return errCorruptWAL
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// bucketFor opens a keystore bucket by its code. The time indexes fill
// their pages completely: new entries land at or near their end, and
// bbolt's default of half-full pages would double them on disk.
func bucketFor(tx *bbolt.Tx, code int) *bbolt.Bucket {
	b := tx.Bucket(allBuckets[code])
	if code == bkLeases || code == bkExpires {
		b.FillPercent = 0.95
	}
	return b
}

// createWAL writes a zero-filled log of size bytes at path: into a
// temporary file first, so a crash never leaves a short log behind.
func createWAL(path string, size int64) (*os.File, error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("create log %s: %w", path, err)
	}
	zeros := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(zeros)) {
		if _, err := f.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	f.Close()
	// Opened again under its own name, which errors then show.
	if f, err = os.OpenFile(path, os.O_RDWR, 0o600); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// newGen draws a log generation.
func newGen() uint64 { return rand.Uint64() }

// recoverWAL applies the log records newer than the committed file and
// starts a new generation. It returns the log, ready to be written from its
// start, the seq of its last record, the generation, and how many records
// it applied.
func recoverWAL(db *bbolt.DB, dbPath string, size int64) (f *os.File, seq, gen uint64, replayed int, err error) {
	path := walPath(dbPath)
	buf, err := readWAL(path)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	gen = newGen()
	err = db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketWAL)
		var prevGen uint64
		if v := b.Get(walApplied); len(v) == 8 {
			seq = binary.BigEndian.Uint64(v)
		}
		if v := b.Get(walGen); len(v) == 8 {
			prevGen = binary.BigEndian.Uint64(v)
		}
		// Records of the committed generation all follow its last commit.
		for _, r := range parseWAL(buf, prevGen) {
			if r.seq != seq+1 {
				return fmt.Errorf("log %s: record %d follows %d: records are missing", path, r.seq, seq)
			}
			if err := replayWAL(tx, r.payload); err != nil {
				return fmt.Errorf("log %s: record %d: %w", path, r.seq, err)
			}
			seq = r.seq
			replayed++
		}
		if err := b.Put(walApplied, u64(seq)); err != nil {
			return err
		}
		return b.Put(walGen, u64(gen))
	})
	if err != nil {
		return nil, 0, 0, 0, err
	}
	if st, err := os.Stat(path); err == nil && st.Size() == size {
		f, err := os.OpenFile(path, os.O_RDWR, 0o600)
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("open log: %w", err)
		}
		return f, seq, gen, replayed, nil
	}
	f, err = createWAL(path, size)
	return f, seq, gen, replayed, err
}
