package bolt

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/n8n-guard/n8n-guard/internal/durable"
)

// Opening the file. Silence is the worst failure of a store: a file that
// lost answered keys and opened anyway would accept those keys again. So
// whatever can be detected stops the start with a message that names the
// file and the way out, before the file is opened for writing:
//
//   - The store file is missing, or empty, while its marker (<path>.id,
//     written beside it when the store was created) says there was one.
//   - The meta pages: either damaged, or the newest one pointing past the
//     end of the file (the file was truncated).
//   - A walk over every page of the file, with bbolt's panics on damaged
//     pages ("assertion failed: Page expected to be …") recovered into an
//     error, and the number of keys checked against the per-state counts
//     kept with them (a damaged leaf that lost keys shows here).
//   - The schema version: newer than this binary knows.
//
//   - bbolt's full consistency check (tx.Check: key order, pages reached
//     twice or never, the free list), after the walk.
//
// At a million keys the checks take about 0.8 s and bbolt's own open,
// which rebuilds its free list by another walk (NoFreelistSync), about
// 0.5 s (BenchmarkOpen1M, docs/performance.md): affordable at every start.

// schemaVersion is the layout of the keystore's buckets this code reads
// and writes; a file with a higher one was written by a newer n8n-guard.
const schemaVersion = 1

var (
	bucketMeta = []byte("meta")
	metaSchema = []byte("schema")
	metaID     = []byte("id") // the store's identity, also in the marker
)

// markerPath is the file that says a store was created at path. Without it
// a deleted store file would be created again, empty, in silence.
func markerPath(path string) string { return path + ".id" }

// theWayOut ends every refusal to open: how to get going again.
func theWayOut(path string) string {
	return fmt.Sprintf("restore %s from a backup (docs/runbooks.md, \"The server does not start\"); do not start on a damaged store, it may accept again keys that were answered before", filepath.Base(path))
}

func refuse(path, format string, args ...any) error {
	return fmt.Errorf("store %s: %s; %s", path, fmt.Sprintf(format, args...), theWayOut(path))
}

func bboltOptions(opts Options, readOnly bool) *bbolt.Options {
	return &bbolt.Options{
		Timeout:  opts.LockTimeout,
		ReadOnly: readOnly,
		// The freelist is rebuilt on open instead of written at every
		// commit: fewer pages per commit, the same durability (as etcd).
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	}
}

// openFile checks the store file at path and opens it for writing,
// creating it (and its marker) when neither exists.
func openFile(path string, opts Options) (*bbolt.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	marker, err := readMarker(path)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && marker != "":
		return nil, refuse(path, "the store file is missing, but %s says store %s was created here", filepath.Base(markerPath(path)), marker)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("store %s: %w", path, err)
	case err == nil && st.Size() == 0 && marker != "":
		return nil, refuse(path, "the store file is empty, but %s says store %s was created here", filepath.Base(markerPath(path)), marker)
	case err == nil && st.Size() > 0:
		if err := checkMeta(path, st.Size(), opts); err != nil {
			return nil, err
		}
		if err := walkFile(path, opts); err != nil {
			return nil, err
		}
	}
	db, err := openBolt(path, bboltOptions(opts, false))
	if err != nil {
		return nil, err
	}
	if err := prepare(db, path, marker, opts); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// openBolt is bbolt.Open with its panics and its lock timeout turned into
// errors that say what to do.
func openBolt(path string, o *bbolt.Options) (db *bbolt.DB, err error) {
	defer func() {
		if p := recover(); p != nil {
			db, err = nil, refuse(path, "the file is damaged (bbolt: %v)", p)
		}
	}()
	db, err = bbolt.Open(path, 0o600, o)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open store %s: the file is locked by another process (is another n8n-guard running on this data folder?)", path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
		return nil, refuse(path, "the file is not a readable store (%v)", err)
	case err != nil:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return db, nil
}

// checkMeta reads both meta pages (readMeta, check.go): the newest valid
// one must describe a file no longer than the one on disk.
func checkMeta(path string, size int64, opts Options) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	defer f.Close()
	m0, err0 := readMeta(f, 0)
	pageSize := int64(4096)
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	m1, err1 := readMeta(f, pageSize)
	ok0, ok1 := err0 == nil, err1 == nil
	var m bboltMeta
	switch {
	case !ok0 && !ok1:
		return refuse(path, "both of its meta pages are damaged or missing (%d bytes)", size)
	case ok0 && (!ok1 || m0.txid > m1.txid):
		m = m0
	default:
		m = m1
	}
	if !ok0 || !ok1 {
		// bbolt would open the other meta page's commit, the one before,
		// and lose the last one if it was answered. A process crash cannot
		// tear the page (the kernel has it whole); power loss during a
		// commit can, and then that commit was never answered: the
		// runbook says how to go on in that one case.
		bad := 0
		if ok0 {
			bad = 1
		}
		return refuse(path, "meta page %d is damaged (the other one holds commit %d); if the machine lost power during a write, see docs/runbooks.md \"meta page … is damaged\"", bad, m.txid)
	}
	if need := int64(m.pgid) * int64(m.pageSize); need > size {
		return refuse(path, "the file is %d bytes but its last commit (%d) needs %d: it was truncated", size, m.txid, need)
	}
	return nil
}

// walkFile reads every page reachable from the newest meta page, with
// bbolt's panics on damaged pages recovered, and checks the key count.
func walkFile(path string, opts Options) (err error) {
	db, err := openBolt(path, bboltOptions(opts, true))
	if err != nil {
		return err
	}
	defer db.Close()
	defer func() {
		if p := recover(); p != nil {
			err = refuse(path, "the file is damaged (bbolt: %v)", p)
		}
	}()
	return db.View(func(tx *bbolt.Tx) error {
		var walk func(b *bbolt.Bucket) error
		walk = func(b *bbolt.Bucket) error {
			return b.ForEachBucket(func(k []byte) error { return walk(b.Bucket(k)) })
		}
		if err := tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			c := b.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
			}
			return walk(b)
		}); err != nil {
			return refuse(path, "the file is damaged (%v)", err)
		}
		if v := bucketValue(tx, bucketMeta, metaSchema); len(v) == 8 && binary.BigEndian.Uint64(v) > schemaVersion {
			return fmt.Errorf("store %s: its schema is version %d, newer than this n8n-guard knows (%d): run a newer n8n-guard", path, binary.BigEndian.Uint64(v), schemaVersion)
		}
		if err := checkCounts(tx, path); err != nil {
			return err
		}
		// bbolt's own check (key order, pages reached twice or never) runs
		// only now: it rebuilds the free list in a goroutine of its own,
		// where a damaged page would crash the process instead of failing
		// the start; the walk above has read every page safely.
		for err := range tx.Check() {
			return refuse(path, "bbolt's consistency check failed (%v)", err)
		}
		return nil
	})
}

func bucketValue(tx *bbolt.Tx, bucket, key []byte) []byte {
	if b := tx.Bucket(bucket); b != nil {
		return b.Get(key)
	}
	return nil
}

// checkCounts compares the keys in the file with the per-state counts
// every write keeps beside them: a damaged page that lost keys shows here.
func checkCounts(tx *bbolt.Tx, path string) error {
	keys, counts := tx.Bucket(bucketKeys), tx.Bucket(bucketCounts)
	if keys == nil || counts == nil {
		return nil // a file from before the keystore wrote to it
	}
	var n, want uint64
	c := keys.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	c = counts.Cursor()
	for _, v := c.First(); v != nil; _, v = c.Next() {
		if len(v) == 8 {
			want += binary.BigEndian.Uint64(v)
		}
	}
	if n != want {
		return refuse(path, "it holds %d keys but its counts say %d: keys were lost to damage", n, want)
	}
	return nil
}

// prepare creates what a new store needs and checks what an old one has:
// the buckets, the schema version, the identity and its marker, and
// applies a log left by the previous version.
func prepare(db *bbolt.DB, path, marker string, opts Options) error {
	var id string
	consoleIndexes := true // idx/owner exists: the console's indexes are built
	err := db.Update(func(tx *bbolt.Tx) error {
		consoleIndexes = tx.Bucket(bucketOwners) != nil || tx.Bucket(bucketKeys) == nil
		for _, b := range append([][]byte{bucketMeta}, allBuckets...) {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaSchema); len(v) == 8 && binary.BigEndian.Uint64(v) > schemaVersion {
			return fmt.Errorf("its schema is version %d, newer than this n8n-guard knows (%d): run a newer n8n-guard", binary.BigEndian.Uint64(v), schemaVersion)
		}
		if err := meta.Put(metaSchema, u64(schemaVersion)); err != nil {
			return err
		}
		if v := meta.Get(metaID); v != nil {
			id = string(v)
			return nil
		}
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		id = hex.EncodeToString(b[:])
		return meta.Put(metaID, []byte(id))
	})
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	if marker != "" && marker != id {
		// A store restored from another data folder: allowed, and said.
		opts.Logger.Warn("store: the file is another store than the one created here; using it", "path", path, "store", id, "marker", marker)
	}
	if marker != id {
		if err := writeMarker(path, id); err != nil {
			return err
		}
	}
	if err := migrateLegacyLog(db, path, opts.Logger); err != nil {
		return err
	}
	if !consoleIndexes {
		n, err := backfillConsole(db)
		if err != nil {
			return fmt.Errorf("store %s: build the console's indexes: %w", path, err)
		}
		opts.Logger.Info("store: built the console's indexes (owner, waiting keys) of a file from an older version", "records", n)
	}
	return nil
}

func readMarker(path string) (string, error) {
	b, err := os.ReadFile(markerPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store %s: %w", markerPath(path), err)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeMarker writes the marker through a temporary file, so that a crash
// never leaves half a marker.
func writeMarker(path, id string) error {
	if err := durable.Replace(markerPath(path), []byte(id+"\n")); err != nil {
		return fmt.Errorf("store marker: %w", err)
	}
	return nil
}
