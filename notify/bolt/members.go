package bolt

import (
	"bytes"
	"context"
	"encoding/binary"

	bolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/notify"
)

// The keys of a group of stuck keys (notify.Member), in two buckets kept in
// step: bucketMembers lists a group's keys in order, bucketMemberOf finds
// the group of a key's attempt. A member is added in the transaction that
// adds its key to the group, settled once, and deleted with its head.
var (
	bucketMembers  = []byte("notify/members")   // head 0 namespace 0 key 0 attempt (8 bytes BE) → settled (1 byte)
	bucketMemberOf = []byte("notify/member-of") // namespace 0 key 0 attempt (8 bytes BE) → head
)

func memberRef(m notify.Member) []byte {
	k := []byte(m.Namespace + "\x00" + m.Key + "\x00")
	return binary.BigEndian.AppendUint64(k, uint64(m.Attempt))
}

func memberKey(head string, m notify.Member) []byte {
	return append([]byte(head+"\x00"), memberRef(m)...)
}

// parseMember reads a bucketMembers key after its head's prefix.
func parseMember(rest []byte, settled []byte) (notify.Member, bool) {
	if len(rest) < 8+2 {
		return notify.Member{}, false
	}
	parts := bytes.SplitN(rest[:len(rest)-8], []byte{0}, 3)
	if len(parts) != 3 || len(parts[2]) != 0 {
		return notify.Member{}, false
	}
	return notify.Member{Namespace: string(parts[0]), Key: string(parts[1]),
		Attempt: int(binary.BigEndian.Uint64(rest[len(rest)-8:])), Settled: len(settled) == 1 && settled[0] == 1}, true
}

// addMember records m as a key of the group whose head is head; a key's
// attempt joins one group (its once-key is added once).
func addMember(tx *bolt.Tx, head string, m *notify.Member) error {
	if m == nil {
		return nil
	}
	if err := tx.Bucket(bucketMembers).Put(memberKey(head, *m), []byte{0}); err != nil {
		return err
	}
	return tx.Bucket(bucketMemberOf).Put(memberRef(*m), []byte(head))
}

// deleteMembers drops the members of a purged head.
func deleteMembers(tx *bolt.Tx, head string) error {
	b, of := tx.Bucket(bucketMembers), tx.Bucket(bucketMemberOf)
	prefix := []byte(head + "\x00")
	var del [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		del = append(del, append([]byte(nil), k...))
	}
	for _, k := range del {
		if err := b.Delete(k); err != nil {
			return err
		}
		if err := of.Delete(k[len(prefix):]); err != nil {
			return err
		}
	}
	return nil
}

// Settle implements notify.Outbox.
func (o *Outbox) Settle(ctx context.Context, m notify.Member, fn func(head *notify.Record)) (*notify.Record, error) {
	var out *notify.Record
	// Batch: settles of many keys at once (a group decided) share a
	// commit; fn may run again, on the record as then stored.
	err := o.db().Batch(func(tx *bolt.Tx) error {
		out = nil
		head := tx.Bucket(bucketMemberOf).Get(memberRef(m))
		if head == nil {
			return nil
		}
		mk := memberKey(string(head), m)
		if v := tx.Bucket(bucketMembers).Get(mk); len(v) != 1 || v[0] != 0 {
			return nil // settled already (or gone with its head)
		}
		cur, err := getRecord(tx, string(head))
		if err != nil || cur == nil {
			return err
		}
		if err := tx.Bucket(bucketMembers).Put(mk, []byte{1}); err != nil {
			return err
		}
		old := *cur
		fn(cur)
		out = cur
		return putRecord(tx, &old, cur)
	})
	return out, notify.Unavailable("settle", err)
}

// Members implements notify.Outbox.
func (o *Outbox) Members(ctx context.Context, head string, after *notify.Member, limit int) ([]notify.Member, error) {
	var out []notify.Member
	err := o.db().View(func(tx *bolt.Tx) error {
		prefix := []byte(head + "\x00")
		c := tx.Bucket(bucketMembers).Cursor()
		k, v := c.Seek(prefix)
		if after != nil {
			from := memberKey(head, *after)
			k, v = c.Seek(from)
			if bytes.Equal(k, from) {
				k, v = c.Next()
			}
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
			if m, ok := parseMember(k[len(prefix):], v); ok {
				out = append(out, m)
			}
		}
		return nil
	})
	return out, notify.Unavailable("members", err)
}
