package bolt

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/n8n-guard/n8n-guard/internal/durable"
	"github.com/n8n-guard/n8n-guard/keystore"
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
//   - The schema version: newer than this binary knows.
//   - The file is older than the last one this data folder served (a
//     backup restored in place): its commit counter is below the one the
//     marker holds (generation.go), unless AcceptRestore says so.
//
// What grows with the file runs after the start, in the background
// (checkWhole): a walk over every page with bbolt's panics on damaged
// pages recovered into an error, the number of keys checked against the
// per-state counts kept with them, and bbolt's full consistency check
// (tx.Check). If it finds damage the store stops writing, loudly
// (store_unavailable, one log line, BackgroundCheckFailed), and stays
// stopped. Meanwhile every record read is checked by its own checksum
// (checksum.go), so nothing is decided on a damaged record; a page too
// damaged to read fails its request, never the process (Store.view).
// At ten million keys a start takes the same few milliseconds as at a
// thousand (BenchmarkStart, docs/performance.md).

// schemaVersion is the layout of the keystore's buckets this code reads
// and writes; a file with a higher one was written by a newer n8n-guard.
// Schema 2 seals every record with a checksum (checksum.go). Schema 3
// writes a record with a stage in a layout of its own and keeps idx/stage
// (stage.go): a release of schema 2 reads those records as damaged and
// does not keep the index, so it refuses the file instead of starting on
// it, and an index it could not keep never misleads a queue afterwards.
const schemaVersion = 3

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
		// The free list is written at every commit, so that an open reads
		// it instead of rebuilding it by a walk of the whole file: a start
		// does not grow with the store (one more page per commit).
		NoFreelistSync: false,
		FreelistType:   bbolt.FreelistMapType,
	}
}

// openFile checks the store file at path and opens it for writing,
// creating it (and its marker) when neither exists.
func openFile(path string, opts Options) (*bbolt.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	marker, markerGen, err := readMarker(path)
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
		freelist, err := checkMeta(path, st.Size(), opts)
		if err != nil {
			return nil, err
		}
		if !freelist {
			if err := walkFile(path, opts); err != nil {
				return nil, err
			}
		}
	}
	db, err := openBolt(path, bboltOptions(opts, false))
	if err != nil {
		return nil, err
	}
	if err := readied(db, path, marker, markerGen, opts); err != nil {
		return nil, err
	}
	return db, nil
}

// readied checks and prepares the opened db; a page too damaged for bbolt
// to read (its panic) is a refusal, and closes db.
func readied(db *bbolt.DB, path, marker string, markerGen uint64, opts Options) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = refuse(path, "the file is damaged (bbolt: %v)", p)
		}
		if err != nil {
			db.Close()
		}
	}()
	if err := checkRestore(db, path, marker, markerGen, opts); err != nil { // generation.go
		return err
	}
	return prepare(db, path, marker, markerGen, opts)
}

// openChecked is openFile followed by the whole-file check, for a reopen
// after a storage error: the file may have been changed meanwhile.
func openChecked(path string, opts Options, damaged func(ns, key string)) (*bbolt.DB, error) {
	db, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	if err := checkWhole(db, path, nil, damaged); err != nil {
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
func checkMeta(path string, size int64, opts Options) (savedFreelist bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("store %s: %w", path, err)
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
		return false, refuse(path, "both of its meta pages are damaged or missing (%d bytes)", size)
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
		return false, refuse(path, "meta page %d is damaged (the other one holds commit %d); if the machine lost power during a write, see docs/runbooks.md \"meta page … is damaged\"", bad, m.txid)
	}
	if need := int64(m.pgid) * int64(m.pageSize); need > size {
		return false, refuse(path, "the file is %d bytes but its last commit (%d) needs %d: it was truncated", size, m.txid, need)
	}
	return m.freelist != noFreelist, nil
}

// errCheckStopped ends a whole-file check when the store closes.
var errCheckStopped = errors.New("the check was stopped: the store is closing")

// checkWhole reads every page reachable from the newest meta page of the
// open db, with bbolt's panics on damaged pages recovered, and checks that
// keys are in order, that every record passes its checksum and that the
// key count matches the per-state counts. Its time grows with the file:
// it runs after the start (Store.checkInBackground) and at a reopen, in
// one read transaction beside the writes, until stop is closed.
//
// bbolt's tx.Check is not among it: it compares the pages reached with
// the free list the writer keeps changing, and reports pages a later
// commit took as lost. It runs offline (Check, store check) and on a file
// that has no saved free list before bbolt opens it (walkFile).
//
// A record that fails its checksum is given to damaged, and the walk goes
// on: the key answers record_damaged, the rest of the store is sound. With
// damaged nil it ends the check like any other damage.
func checkWhole(db *bbolt.DB, path string, stop <-chan struct{}, damaged func(ns, key string)) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = refuse(path, "the file is damaged (bbolt: %v)", p)
		}
	}()
	return db.View(func(tx *bbolt.Tx) error {
		// A schema-1 file (an older release's, walked before Open seals
		// it) has no seals yet: its records are not checked for one.
		v := bucketValue(tx, bucketMeta, metaSchema)
		sealed := len(v) == 8 && binary.BigEndian.Uint64(v) >= 2
		n := 0
		var walk func(name []byte, b *bbolt.Bucket) error
		walk = func(name []byte, b *bbolt.Bucket) error {
			records := sealed && bytes.Equal(name, bucketKeys)
			var prev []byte
			c := b.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if n++; n%65536 == 0 {
					select {
					case <-stop:
						return errCheckStopped
					default:
					}
				}
				if prev != nil && bytes.Compare(prev, k) >= 0 {
					return refuse(path, "the file is damaged: keys out of order in bucket %q", name)
				}
				prev = append(prev[:0], k...)
				if records && v != nil {
					if _, ok := openSeal(k, v); !ok {
						ns, key := splitRecordKey(k)
						if damaged != nil {
							damaged(ns, key)
							continue
						}
						return refuse(path, "the record of %s/%s fails its checksum (and maybe others: run n8n-guard store check on a copy)", ns, key)
					}
				}
				if v == nil {
					if err := walk(k, b.Bucket(k)); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if err := tx.ForEach(walk); err != nil {
			return err
		}
		return checkCounts(tx, path)
	})
}

// walkFile reads every page of the closed file at path with bbolt's
// panics recovered, then runs bbolt's tx.Check. A file without a saved
// free list (NoFreelistSync, versions before the start stopped growing
// with the store) gets it before bbolt opens it for writing: bbolt
// rebuilds that free list by a walk of its own, in a goroutine whose
// panic on a damaged page would end the process.
func walkFile(path string, opts Options) (err error) {
	db, err := openBolt(path, bboltOptions(opts, true))
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkWhole(db, path, nil, nil); err != nil {
		return err
	}
	return db.View(func(tx *bbolt.Tx) error {
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
func prepare(db *bbolt.DB, path, marker string, markerGen uint64, opts Options) error {
	var id string
	consoleIndexes := true // idx/owner exists: the console's indexes are built
	wokenIndex := true     // idx/woken exists
	stageIndex := true     // idx/stage holds every key
	waitsIndex := true     // idx/waits holds every parked key
	newFile := false
	err := db.Update(func(tx *bbolt.Tx) error {
		newFile = tx.Bucket(bucketKeys) == nil
		consoleIndexes = tx.Bucket(bucketOwners) != nil || newFile
		wokenIndex = tx.Bucket(bucketWoken) != nil || newFile
		for _, b := range append([][]byte{bucketMeta}, allBuckets...) {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if newFile {
			if err := meta.Put(metaStageIndex, []byte{1}); err != nil {
				return err
			}
			if err := meta.Put(metaWaitsIndex, []byte{1}); err != nil {
				return err
			}
		}
		stageIndex = meta.Get(metaStageIndex) != nil
		waitsIndex = meta.Get(metaWaitsIndex) != nil
		if v := meta.Get(metaSchema); len(v) == 8 && binary.BigEndian.Uint64(v) > schemaVersion {
			return fmt.Errorf("its schema is version %d, newer than this n8n-guard knows (%d): run a newer n8n-guard", binary.BigEndian.Uint64(v), schemaVersion)
		}
		if meta.Get(metaSchema) == nil {
			// A new file starts at the current schema; a file from before
			// the schema was written is schema 1, upgraded below.
			schema := uint64(schemaVersion)
			if !newFile {
				schema = 1
			}
			if err := meta.Put(metaSchema, u64(schema)); err != nil {
				return err
			}
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
	gen, err := generation(db)
	if err != nil {
		return fmt.Errorf("store %s: %w", path, err)
	}
	if marker != id || gen != markerGen {
		if err := writeMarker(path, id, gen); err != nil {
			return err
		}
	}
	if err := refuseWriteAheadLog(db, path); err != nil {
		return err
	}
	if err := upgradeSchema(db, path, opts.Logger); err != nil { // checksum.go
		return err
	}
	if !consoleIndexes {
		n, err := backfillConsole(db)
		if err != nil {
			return fmt.Errorf("store %s: build the console's indexes: %w", path, err)
		}
		opts.Logger.Info("store: built the console's indexes (owner, waiting keys) of a file from an older version", "records", n)
	}
	if !wokenIndex {
		n, err := backfillWoken(db)
		if err != nil {
			return fmt.Errorf("store %s: build the index of woken parked keys: %w", path, err)
		}
		opts.Logger.Info("store: built the index of woken parked keys of a file from an older version", "woken", n)
	}
	if !stageIndex {
		n, err := backfillStage(db)
		if err != nil {
			return fmt.Errorf("store %s: build the index of the keys' stages: %w", path, err)
		}
		args := []any{}
		for _, st := range keystore.Stages {
			if n[st] > 0 {
				args = append(args, string(st), n[st])
			}
		}
		opts.Logger.Info("store: built the index of the keys' stages (parked phases, re-runs) of a file from an older version, once", args...)
	}
	if !waitsIndex {
		n, err := backfillWaits(db)
		if err != nil {
			return fmt.Errorf("store %s: build the index of the parked keys by the start of their wait: %w", path, err)
		}
		opts.Logger.Info("store: built the index of the parked keys by the start of their wait of a file from an older version, once", "parked", n)
	}
	return nil
}

// readMarker returns the store id and the generation (the last commit
// counter this data folder served, generation.go) its marker holds.
func readMarker(path string) (string, uint64, error) {
	b, err := os.ReadFile(markerPath(path))
	if errors.Is(err, os.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("store %s: %w", markerPath(path), err)
	}
	id, rest, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	var gen uint64
	if g, ok := strings.CutPrefix(strings.TrimSpace(rest), "generation "); ok {
		gen, _ = strconv.ParseUint(g, 10, 64)
	}
	return strings.TrimSpace(id), gen, nil
}

// writeMarker writes the marker through a temporary file, so that a crash
// never leaves half a marker.
func writeMarker(path, id string, gen uint64) error {
	if err := durable.Replace(markerPath(path), []byte(fmt.Sprintf("%s\ngeneration %d\n", id, gen))); err != nil {
		return fmt.Errorf("store marker: %w", err)
	}
	return nil
}

// refuseWriteAheadLog stops a start on a file from a development build (up
// to a3e635a, never released) that kept answered writes in <path>.wal
// beside it: this version cannot apply that log, and starting without it
// could accept again keys only the log held.
func refuseWriteAheadLog(db *bbolt.DB, path string) error {
	_, err := os.Stat(path + ".wal")
	hasLog := err == nil
	_ = db.View(func(tx *bbolt.Tx) error {
		hasLog = hasLog || tx.Bucket([]byte("wal")) != nil
		return nil
	})
	if !hasLog {
		return nil
	}
	return fmt.Errorf("store %s was written by a development build that kept a write-ahead log (%s.wal); "+
		"no release did, and this version cannot apply it: start that build once to apply it, or restore a backup", path, filepath.Base(path))
}
