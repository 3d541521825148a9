package api

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/n8n-guard/n8n-guard/api/wire"
	"github.com/n8n-guard/n8n-guard/errs"
)

// BackupPath is the route of a backup (wire.BackupPath).
const BackupPath = wire.BackupPath

// Backuper is a store that can copy itself while it serves (bbolt), passed
// as Config.Backup. PostgreSQL is backed up with pg_dump instead
// (docs/postgres.md).
type Backuper interface {
	// Backup hands write a consistent snapshot and its size.
	Backup(ctx context.Context, write func(size int64, snapshot io.WriterTo) error) error
}

// backup streams a snapshot of the store file. The snapshot stays open
// until the last byte is sent; the size goes out as Content-Length, so a
// copy cut short (a failed read, the server stopping) is an incomplete
// body to the client, never a shorter file that looks whole.
func (s *Server) backup(c *fiber.Ctx) error {
	b := s.backuper
	if b == nil {
		return errs.Errorf(errs.Unsupported,
			"this server's store is PostgreSQL: back it up with pg_dump (see docs/postgres.md)")
	}
	pr, pw := io.Pipe()
	sized := make(chan int64, 1)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		var sent int64
		err := b.Backup(context.Background(), func(size int64, snap io.WriterTo) error {
			sized <- size
			n, err := snap.WriteTo(pw)
			sent = n
			return err
		})
		pw.CloseWithError(err) // nil: the reader sees EOF
		switch {
		case errors.Is(err, io.ErrClosedPipe):
			s.log.Warn("backup not finished: the client went away", "bytes_sent", sent)
		case err != nil:
			s.log.Error("backup failed", "bytes_sent", sent, "err", err)
		default:
			s.log.Info("backup sent", "bytes", sent, "took", time.Since(start).Round(time.Millisecond))
		}
		done <- err
	}()
	select {
	case size := <-sized:
		c.Set(fiber.HeaderContentType, "application/octet-stream")
		c.Set(fiber.HeaderContentDisposition, `attachment; filename="n8n-guard-`+time.Now().UTC().Format("20060102T150405Z")+`.db"`)
		// fasthttp reads pr while writing the answer and closes it when
		// done or when the connection drops; either ends the snapshot.
		c.Context().SetBodyStream(pr, int(size))
		return nil
	case err := <-done:
		return err // nothing sent yet: answered as a problem
	}
}
