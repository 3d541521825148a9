package postgres

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Every row of guard_keys carries a checksum of its record and version
// (migration 0004), written with the row and compared at every read
// (scanRecord). PostgreSQL checks its own pages only when the cluster was
// initialised with data checksums, and never sees a row changed by hand:
// a completed key edited into failed and retryable would be accepted
// again. A row that fails is never decided on: its key answers
// record_damaged and nothing is written over it.
//
// The checksum is computed from the record as PostgreSQL gives it back,
// so every value goes in as it comes out: times at microseconds (sent
// truncated, so the database does not round them), JSON as sent.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rowChecksum is the checksum of r stored at version.
func rowChecksum(r *keystore.Record, version int64) int64 {
	var b []byte
	str := func(s string) { b = binary.AppendUvarint(b, uint64(len(s))); b = append(b, s...) }
	num := func(v int64) { b = binary.AppendVarint(b, v) }
	tm := func(t *time.Time) {
		if t == nil {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		num(t.UnixMicro())
	}
	str(r.Namespace)
	str(r.Key)
	num(version)
	str(string(r.State))
	num(int64(r.Attempt))
	str(r.Owner)
	tm(r.LeaseExpiresAt)
	str(r.ResultRef)
	str(string(r.Result))
	str(string(r.Reason))
	str(r.Message)
	if r.Retryable {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	str(string(r.Via))
	str(r.Destination)
	tm(&r.CreatedAt)
	tm(&r.UpdatedAt)
	tm(r.ExpiresAt)
	str(r.ResolvedBy)
	tm(r.ResolvedAt)
	str(r.Note)
	num(int64(len(r.History)))
	for _, h := range r.History {
		num(h.At.UnixNano())
		str(string(h.Event))
		num(int64(h.Attempt))
		str(h.By)
		str(h.Detail)
	}
	str(string(r.Fingerprint))
	str(string(r.TokenHash))
	str(string(r.TokenSeal))
	// The park fields (migration 0005) follow only when one is set, so a
	// row written before them (or never parked) hashes as it did then; a
	// park field set or cleared beneath the service changes the checksum.
	if r.ParkedAt != nil || r.ResumeURL != "" || r.ResumeSentAt != nil || r.ResumeClaimUntil != nil {
		b = append(b, 'P')
		tm(r.ParkedAt)
		str(r.ResumeURL)
		tm(r.ResumeSentAt)
		tm(r.ResumeClaimUntil)
	}
	// The hold of a key waiting for its check (migration 0006), likewise.
	if h := r.Check; h != nil {
		b = append(b, 'C')
		str(h.Check)
		tm(&h.Since)
		tm(h.ClaimUntil)
		num(int64(h.Claims))
		str(h.ResumeURL)
	}
	// The summary (migration 0014), likewise.
	if r.Summary != "" {
		b = append(b, 'S')
		str(r.Summary)
	}
	// The first parking of an event that parked anew (migration 0018),
	// likewise.
	if r.ParkedSince != nil {
		b = append(b, 'F')
		tm(r.ParkedSince)
	}
	return int64(crc32.Checksum(b, castagnoli))
}

// micro is t as the database keeps it.
func micro(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

func microPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := micro(*t)
	return &v
}

// atMicros returns a copy of r with its times as the database keeps them.
func atMicros(r *keystore.Record) *keystore.Record {
	c := *r
	c.CreatedAt, c.UpdatedAt = micro(c.CreatedAt), micro(c.UpdatedAt)
	c.LeaseExpiresAt, c.ExpiresAt, c.ResolvedAt = microPtr(c.LeaseExpiresAt), microPtr(c.ExpiresAt), microPtr(c.ResolvedAt)
	c.ParkedAt, c.ResumeSentAt, c.ResumeClaimUntil = microPtr(c.ParkedAt), microPtr(c.ResumeSentAt), microPtr(c.ResumeClaimUntil)
	c.ParkedSince = microPtr(c.ParkedSince)
	return &c
}

// noteDamage says once per record, in the log and to Options.Damaged, that
// err is a damaged record; other errors pass.
func (s *Store) noteDamage(err error) {
	if errs.CodeOf(err) != errs.RecordDamaged {
		return
	}
	msg := errs.MessageOf(err)
	if !s.firstDamage(msg) {
		return
	}
	s.log.Error("postgres store: a row failed its checksum; its key answers record_damaged until it is restored or repaired by hand; every listing and the catch-up skip it", "err", msg)
	if ns, key, ok := keystore.DamagedKey(err); ok {
		// Not waited for: a damaged row is met while rows are read.
		s.told.Add(1)
		go func() {
			defer s.told.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := s.tellDamaged(ctx, ns, key)
			if err != nil {
				s.log.Error("postgres store: the event about a damaged row could not be written; its owner hears of it at the next start", "namespace", ns, "key", key, "err", err)
			}
		}()
	}
}

// firstDamage says whether what (a damaged row's or event's message) is
// met for the first time in this process, telling Options.Damaged then.
func (s *Store) firstDamage(what string) bool {
	if _, seen := s.damage.LoadOrStore(what, true); seen {
		return false
	}
	if s.damaged != nil {
		s.damaged()
	}
	return true
}

// tellDamaged writes the event about a damaged row for its namespace's
// owner (keystore.DamagedEvent).
func (s *Store) tellDamaged(ctx context.Context, ns, key string) error {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	queueEvent(b, keystore.DamagedEvent(ns, key, now))
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	s.commits.Notify()
	return nil
}

// addChecksums gives every row written before migration 0004 its
// checksum, in batches, and logs how many; a row another writer changes
// meanwhile gets its checksum from that write.
func addChecksums(ctx context.Context, s *Store) error {
	total := 0
	afterNS, afterKey := "", ""
	for {
		rows, err := s.pool.Query(ctx, `SELECT namespace, key, `+pgKeyRead+` FROM guard_keys
			WHERE checksum IS NULL AND (namespace, key) > ($1, $2) ORDER BY namespace, key LIMIT 1000`, afterNS, afterKey)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		for rows.Next() {
			var ns, key string
			r, version, err := scanRecord(prefixRow{rows, []any{&ns, &key}}, "", "")
			if err != nil {
				rows.Close()
				return err
			}
			afterNS, afterKey = ns, key
			b.Queue(`UPDATE guard_keys SET checksum = $3 WHERE namespace = $1 AND key = $2 AND version = $4 AND checksum IS NULL`,
				ns, key, rowChecksum(r, version), version)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if b.Len() == 0 {
			break
		}
		if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		total += b.Len()
	}
	if total > 0 {
		s.log.Info("postgres store: added a checksum to every row written before checksums existed, once", "rows", total)
	}
	return nil
}
