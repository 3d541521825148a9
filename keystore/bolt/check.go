package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrInUse says a store file is held by a running n8n-guard (bbolt's file
// lock), so it cannot be checked offline.
var ErrInUse = errors.New("the store file is in use by a running n8n-guard (its file lock is held)")

// CheckReport is what Check found in a store file.
type CheckReport struct {
	Path     string
	Size     int64 // bytes on disk
	PageSize int
	TxID     uint64 // the transaction of the meta page in use
	Keys     int    // records in the keys bucket
	// Problems are the damage found, at most MaxCheckProblems of them;
	// Truncated says there were more.
	Problems  []string
	Truncated bool
	// Damaged names every record (namespace/key) that fails its
	// checksum, all of them: each is also counted in Problems once.
	Damaged []string
}

// MaxCheckProblems bounds the problems one Check reports: a badly damaged
// file can have thousands, and the first few say what happened.
const MaxCheckProblems = 50

// OK tells whether the file has no problem.
func (r CheckReport) OK() bool { return len(r.Problems) == 0 }

func (r *CheckReport) problem(format string, args ...any) {
	if len(r.Problems) == MaxCheckProblems {
		r.Truncated = true
		return
	}
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// CheckHeader reads the two meta pages of the store file at path and
// compares the file's size with the pages they say it has. It never
// hands the file to bbolt, which panics (or faults on the memory map) on
// some damage, truncation first of all, instead of returning an error.
func CheckHeader(path string) (CheckReport, error) {
	rep := CheckReport{Path: path}
	f, err := os.Open(path)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, err
	}
	rep.Size = fi.Size()
	m0, err0 := readMeta(f, 0)
	pageSize := int64(4096)
	if err0 == nil {
		pageSize = int64(m0.pageSize)
	}
	m1, err1 := readMeta(f, pageSize)
	switch {
	case err0 != nil && err1 != nil:
		rep.problem("neither meta page is valid (page 0: %v; page 1: %v): this is not a bbolt file, or its first pages are damaged", err0, err1)
		return rep, nil
	case err0 != nil:
		rep.problem("meta page 0 is not valid (%v); bbolt would fall back to page 1", err0)
	case err1 != nil:
		rep.problem("meta page 1 is not valid (%v); bbolt would fall back to page 0", err1)
	}
	m := m0
	if err0 != nil || (err1 == nil && m1.txid > m0.txid) {
		m = m1
	}
	rep.PageSize, rep.TxID = int(m.pageSize), m.txid
	if need := int64(m.pgid) * int64(m.pageSize); rep.Size < need {
		rep.problem("the file is truncated: %d bytes on disk, but its pages reach %d bytes (%d pages of %d bytes)",
			rep.Size, need, m.pgid, m.pageSize)
	}
	return rep, nil
}

// bboltMeta is the part of a bbolt meta page Check needs.
type bboltMeta struct {
	pageSize uint32
	freelist uint64 // the free list's page; noFreelist: not saved
	pgid     uint64 // the high-water mark: pages in use
	txid     uint64
}

// noFreelist is bbolt's free-list page of a file that does not save it.
const noFreelist = ^uint64(0)

// readMeta reads the meta page at off. The layout is bbolt's
// (internal/common/meta.go, page.go): a 16-byte page header, then magic,
// version, page size, flags, root bucket (root, sequence), freelist, pgid,
// txid and an FNV-64a checksum of everything before it, in the machine's
// byte order (little-endian on every platform n8n-guard is built for).
func readMeta(r io.ReaderAt, off int64) (bboltMeta, error) {
	const header, size = 16, 64
	buf := make([]byte, size)
	if _, err := r.ReadAt(buf, off+header); err != nil {
		return bboltMeta{}, fmt.Errorf("read: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint32(buf[0:]) != 0xED0CDAED {
		return bboltMeta{}, errors.New("no bbolt magic number")
	}
	if v := le.Uint32(buf[4:]); v != 2 {
		return bboltMeta{}, fmt.Errorf("bbolt format version %d, not 2", v)
	}
	h := fnv.New64a()
	h.Write(buf[:56])
	if h.Sum64() != le.Uint64(buf[56:]) {
		return bboltMeta{}, errors.New("checksum mismatch")
	}
	m := bboltMeta{pageSize: le.Uint32(buf[8:]), freelist: le.Uint64(buf[32:]), pgid: le.Uint64(buf[40:]), txid: le.Uint64(buf[48:])}
	if m.pageSize < 512 || m.pageSize&(m.pageSize-1) != 0 {
		return bboltMeta{}, fmt.Errorf("page size %d is not a power of two", m.pageSize)
	}
	return m, nil
}

// Check runs bbolt's consistency check on the store file at path, which
// no process may have open: it waits at most lockTimeout for the file
// lock, then returns ErrInUse. It reads only.
//
// CheckHeader runs first; with a damaged header or a truncated file the
// pages are not walked (bbolt would fault on them). bbolt's own walk can
// still panic in a goroutine of its own on a page that names the wrong id,
// which ends the process: the command runs Check in a child process for
// that reason (cmd/n8n-guard, store check).
func Check(path string, lockTimeout time.Duration) (CheckReport, error) {
	rep, err := CheckHeader(path)
	if err != nil || !rep.OK() {
		return rep, err
	}
	db, err := bbolt.Open(path, 0o400, &bbolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return rep, ErrInUse
	}
	if err != nil {
		rep.problem("bbolt cannot open the file: %v", err)
		return rep, nil
	}
	defer db.Close()
	err = db.View(func(tx *bbolt.Tx) error {
		for err := range tx.Check() {
			rep.problem("%v", err)
		}
		if !rep.OK() {
			return nil
		}
		keys := tx.Bucket(bucketKeys)
		if keys == nil {
			rep.problem("no %q bucket: this bbolt file is not an n8n-guard store", bucketKeys)
			return nil
		}
		checkRecords(tx, &rep)
		if err := checkCounts(tx, path); err != nil {
			rep.problem("%v", err)
		}
		return nil
	})
	return rep, err
}

// checkRecords checks the checksum of every record; a file of schema 1
// (before checksums; the next start adds them) has none to check.
func checkRecords(tx *bbolt.Tx, rep *CheckReport) {
	if v := bucketValue(tx, bucketMeta, metaSchema); len(v) == 8 && binary.BigEndian.Uint64(v) < 2 {
		rep.Keys = tx.Bucket(bucketKeys).Stats().KeyN
		return
	}
	c := tx.Bucket(bucketKeys).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		rep.Keys++
		if _, ok := openSeal(k, v); ok {
			continue
		}
		ns, key := splitRecordKey(k)
		rep.Damaged = append(rep.Damaged, ns+"/"+key)
	}
	if n := len(rep.Damaged); n > 0 {
		rep.problem("%d records fail their checksum; their keys answer record_damaged: %s", n, strings.Join(rep.Damaged[:min(n, 10)], ", "))
	}
}
