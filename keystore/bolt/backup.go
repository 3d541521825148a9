package bolt

import (
	"context"
	"io"

	bbolt "go.etcd.io/bbolt"
)

// Backup hands write a consistent snapshot of the whole store file (the
// keystore and every other bucket in it, the notify outbox included) and
// its size in bytes; write copies it out with snapshot.WriteTo.
//
// The snapshot is a bbolt read transaction: reserves and every other
// write go on while it is copied, and the copy holds exactly the writes
// answered before Backup was called (they are committed first), plus
// perhaps some answered meanwhile. While it is open, bbolt cannot reuse
// the pages freed since it began (the file may grow by that much), and a
// commit that must grow the memory map waits for it to end; a backup is
// a sequential read of the file, seconds even for gigabytes on a local
// disk.
func (s *Store) Backup(ctx context.Context, write func(size int64, snapshot io.WriterTo) error) error {
	err := s.view(func(tx *bbolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return write(tx.Size(), tx)
	})
	return s.readErr(err)
}
