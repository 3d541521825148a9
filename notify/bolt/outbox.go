// Package bolt keeps notify's outbox in bbolt: buckets named "notify/…" in
// the keystore's file. It only loads, locks and saves; notify decides.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/n8n-guard/n8n-guard/notify"
)

// Buckets of the outbox in the keystore's bbolt file.
var (
	bucketNotifications = []byte("notify/notifications") // id → record (JSON)
	bucketDue           = []byte("notify/due")           // due time (8 bytes BE) + id → nil
	bucketGroups        = []byte("notify/groups")        // group → groupState
	bucketOnce          = []byte("notify/once")          // once-key → time added
	bucketMeta          = []byte("notify/meta")          // event_cursor
	bucketUsers         = []byte("notify/users")         // e-mail → Slack user ID
	bucketEscalate      = []byte("notify/escalate")      // escalation time (8 bytes BE) + id → nil
	bucketKeys          = []byte("notify/keys")          // namespace 0 key 0 id → nil (Record.Subject: key notifications; outages under namespace "")
	bucketMarks         = []byte("notify/marks")         // replay mark → expiry (8 bytes BE)
	keyEventCursor      = []byte("event_cursor")
)

type groupState struct {
	Head string    `json:"head"`
	End  time.Time `json:"end"`
}

// Outbox keeps the outbox in bbolt. Invariants: a record has an entry
// in bucketDue exactly when its DueAt is set, under the key of that DueAt;
// one in bucketEscalate exactly when its EscalateAt is set; and a key
// notification one in bucketKeys while it exists.
type Outbox struct {
	// db is asked for the file at each use: the keystore's bbolt store
	// reopens the file it shares with the outbox after a storage error.
	db func() *bolt.DB
}

var _ notify.Outbox = (*Outbox)(nil)

// New creates the outbox's buckets in the file db returns. db is asked for
// the file at each use: the keystore's bbolt store (bolt.Store.DB) reopens
// the file after a storage error, and the outbox follows it.
func New(db func() *bolt.DB) (*Outbox, error) {
	err := db().Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketNotifications, bucketDue, bucketGroups, bucketOnce, bucketMeta, bucketUsers, bucketEscalate, bucketKeys, bucketMarks, bucketMembers, bucketMemberOf} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("create bucket %s: %w", b, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Outbox{db: db}, nil
}

func dueKey(r *notify.Record) []byte { return timeKey(r.DueAt, r.ID) }

func timeKey(t time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(max(t.UnixNano(), 0)))
	return append(k, id...)
}

func getRecord(tx *bolt.Tx, id string) (*notify.Record, error) {
	v := tx.Bucket(bucketNotifications).Get([]byte(id))
	if v == nil {
		return nil, nil
	}
	r := new(notify.Record)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("decode notification %s: %w", id, err)
	}
	return r, nil
}

// putRecord saves r and keeps the due index in step with it; old is the
// record as it was loaded (nil for a new one).
func putRecord(tx *bolt.Tx, old, r *notify.Record) error {
	due := tx.Bucket(bucketDue)
	if old != nil && !old.DueAt.IsZero() {
		if err := due.Delete(dueKey(old)); err != nil {
			return err
		}
	}
	if !r.DueAt.IsZero() {
		if err := due.Put(dueKey(r), nil); err != nil {
			return err
		}
	}
	esc := tx.Bucket(bucketEscalate)
	if old != nil && old.EscalateAt != nil {
		if err := esc.Delete(timeKey(*old.EscalateAt, old.ID)); err != nil {
			return err
		}
	}
	if r.EscalateAt != nil {
		if err := esc.Put(timeKey(*r.EscalateAt, r.ID), nil); err != nil {
			return err
		}
	}
	if ns, key, ok := r.Subject(); old == nil && ok {
		if err := tx.Bucket(bucketKeys).Put(keyIndex(ns, key, r.ID), nil); err != nil {
			return err
		}
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketNotifications).Put([]byte(r.ID), v)
}

func keyIndex(ns, key, id string) []byte { return []byte(ns + "\x00" + key + "\x00" + id) }

func (o *Outbox) Add(ctx context.Context, adds []notify.Addition, cursor *uint64) ([]notify.Added, error) {
	var out []notify.Added
	fn := func(tx *bolt.Tx) error {
		// Batch may run fn again; start from scratch each time.
		out = make([]notify.Added, 0, len(adds))
		for _, a := range adds {
			res, err := addOne(tx, a)
			if err != nil {
				return err
			}
			out = append(out, res)
		}
		if cursor != nil {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], *cursor)
			return tx.Bucket(bucketMeta).Put(keyEventCursor, b[:])
		}
		return nil
	}
	var err error
	if cursor == nil && len(adds) == 1 {
		// Intake: concurrent requests share one commit (and one fsync);
		// each still returns only after its write is durable.
		err = o.db().Batch(fn)
	} else {
		err = o.db().Update(fn)
	}
	return out, notify.Unavailable("add", err)
}

func addOne(tx *bolt.Tx, a notify.Addition) (notify.Added, error) {
	rec := a.Record
	once := tx.Bucket(bucketOnce)
	if a.Once != "" {
		if once.Get([]byte(a.Once)) != nil {
			return notify.Added{Skipped: true}, nil
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(rec.CreatedAt.UnixNano()))
		if err := once.Put([]byte(a.Once), b[:]); err != nil {
			return notify.Added{}, err
		}
	}
	groups := tx.Bucket(bucketGroups)
	if a.Window > 0 {
		if v := groups.Get([]byte(rec.Group)); v != nil {
			var g groupState
			if err := json.Unmarshal(v, &g); err == nil && rec.CreatedAt.Before(g.End) {
				head, err := getRecord(tx, g.Head)
				if err != nil {
					return notify.Added{}, err
				}
				// A dead head is never sent again: joining it would swallow
				// the failure, so a new group starts instead.
				if head != nil && head.Status != notify.StatusDead {
					old := *head
					notify.Join(head, rec.CreatedAt, a.Window)
					if err := putRecord(tx, &old, head); err != nil {
						return notify.Added{}, err
					}
					if err := addMember(tx, head.ID, a.Member); err != nil {
						return notify.Added{}, err
					}
					return notify.Added{Record: head, Joined: true}, nil
				}
			}
		}
		rec.GroupEnd = rec.CreatedAt.Add(a.Window)
		v, _ := json.Marshal(groupState{Head: rec.ID, End: rec.GroupEnd})
		if err := groups.Put([]byte(rec.Group), v); err != nil {
			return notify.Added{}, err
		}
	}
	if err := putRecord(tx, nil, rec); err != nil {
		return notify.Added{}, err
	}
	if err := addMember(tx, rec.ID, a.Member); err != nil {
		return notify.Added{}, err
	}
	return notify.Added{Record: rec}, nil
}

func (o *Outbox) EventCursor(ctx context.Context) (uint64, error) {
	var c uint64
	err := o.db().View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyEventCursor); len(v) == 8 {
			c = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	return c, notify.Unavailable("event cursor", err)
}

func (o *Outbox) Due(ctx context.Context, now time.Time, limit int) ([]*notify.Record, error) {
	out, err := o.until(bucketDue, now, limit)
	return out, notify.Unavailable("due", err)
}

// until returns up to limit records whose time in the index bucket (a
// timeKey) is at or before now, earliest first.
func (o *Outbox) until(bucket []byte, now time.Time, limit int) ([]*notify.Record, error) {
	var out []*notify.Record
	err := o.db().View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.First(); k != nil && len(out) < limit; k, _ = c.Next() {
			if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) > now.UnixNano() {
				break
			}
			r, err := getRecord(tx, string(k[8:]))
			if err != nil {
				return err
			}
			if r != nil {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, err
}

func (o *Outbox) Update(ctx context.Context, id string, fn func(r *notify.Record)) (*notify.Record, error) {
	var r *notify.Record
	err := o.db().Update(func(tx *bolt.Tx) error {
		cur, err := getRecord(tx, id)
		if err != nil || cur == nil {
			r = nil
			return err
		}
		old := *cur
		fn(cur)
		r = cur
		return putRecord(tx, &old, cur)
	})
	return r, notify.Unavailable("update", err)
}

func (o *Outbox) Get(ctx context.Context, id string) (*notify.Record, error) {
	var r *notify.Record
	err := o.db().View(func(tx *bolt.Tx) error {
		var err error
		r, err = getRecord(tx, id)
		return err
	})
	return r, notify.Unavailable("get", err)
}

func (o *Outbox) Escalating(ctx context.Context, now time.Time, limit int) ([]*notify.Record, error) {
	out, err := o.until(bucketEscalate, now, limit)
	return out, notify.Unavailable("escalating", err)
}

// Escalate: bbolt has one writer, so the transaction alone makes each
// step happen once.
func (o *Outbox) Escalate(ctx context.Context, now time.Time, limit int, fn func(r *notify.Record) *notify.Record) (int, error) {
	n := 0
	err := o.db().Update(func(tx *bolt.Tx) error {
		n = 0
		var ids []string
		c := tx.Bucket(bucketEscalate).Cursor()
		for k, _ := c.First(); k != nil && len(ids) < limit; k, _ = c.Next() {
			if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) > now.UnixNano() {
				break
			}
			ids = append(ids, string(k[8:]))
		}
		for _, id := range ids {
			cur, err := getRecord(tx, id)
			if err != nil {
				return err
			}
			if cur == nil {
				continue
			}
			old := *cur
			esc := fn(cur)
			if err := putRecord(tx, &old, cur); err != nil {
				return err
			}
			if esc != nil {
				if err := putRecord(tx, nil, esc); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return n, notify.Unavailable("escalate", err)
}

func (o *Outbox) List(ctx context.Context, q notify.ListQuery) (notify.Page, error) {
	page := notify.Page{Items: []notify.Notification{}}
	err := o.db().View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketNotifications).Cursor()
		var k, v []byte
		if q.Cursor == "" {
			k, v = c.Last()
		} else {
			// Newest first: the page continues just before the cursor.
			k, v = c.Seek([]byte(q.Cursor))
			if k == nil {
				k, v = c.Last()
			}
			for k != nil && bytes.Compare(k, []byte(q.Cursor)) >= 0 {
				k, v = c.Prev()
			}
		}
		for ; k != nil; k, v = c.Prev() {
			var r notify.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("decode notification %s: %w", k, err)
			}
			if q.Status != "" && r.Status != q.Status {
				continue
			}
			if len(page.Items) == q.Limit {
				page.NextCursor = page.Items[len(page.Items)-1].ID
				break
			}
			page.Items = append(page.Items, r.Item())
		}
		return nil
	})
	return page, notify.Unavailable("list", err)
}

func (o *Outbox) Waiting(ctx context.Context) (int, error) {
	n := 0
	err := o.db().View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketDue).Stats().KeyN
		return nil
	})
	return n, notify.Unavailable("waiting", err)
}

func (o *Outbox) Purge(ctx context.Context, cutoff, now time.Time, limit int) (int, error) {
	n := 0
	err := o.db().Update(func(tx *bolt.Tx) error {
		// IDs sort by creation time: nothing created after cutoff can be old
		// enough, so the scan stops there.
		b := tx.Bucket(bucketNotifications)
		stop := []byte(notify.IDPrefix(cutoff))
		var del []*notify.Record
		c := b.Cursor()
		for k, v := c.First(); k != nil && bytes.Compare(k, stop) < 0 && len(del) < limit; k, v = c.Next() {
			var r notify.Record
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.Status == notify.StatusPending || !r.DueAt.IsZero() || r.EscalateAt != nil {
				continue
			}
			if r.DeliveredAt != nil && r.DeliveredAt.After(cutoff) {
				continue
			}
			del = append(del, &r)
		}
		for _, r := range del {
			if err := b.Delete([]byte(r.ID)); err != nil {
				return err
			}
			if ns, key, ok := r.Subject(); ok {
				if err := tx.Bucket(bucketKeys).Delete(keyIndex(ns, key, r.ID)); err != nil {
					return err
				}
			}
			if r.Kind == notify.KindKeyUnknown {
				if err := deleteMembers(tx, r.ID); err != nil {
					return err
				}
			}
		}
		n = len(del)
		// Closed groups.
		var gdel [][]byte
		g := tx.Bucket(bucketGroups)
		_ = g.ForEach(func(k, v []byte) error {
			var gs groupState
			if json.Unmarshal(v, &gs) != nil || !gs.End.After(now) {
				gdel = append(gdel, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range gdel {
			if err := g.Delete(k); err != nil {
				return err
			}
		}
		var odel [][]byte
		once := tx.Bucket(bucketOnce)
		_ = once.ForEach(func(k, v []byte) error {
			if len(v) == 8 && int64(binary.BigEndian.Uint64(v)) < cutoff.UnixNano() {
				odel = append(odel, append([]byte(nil), k...))
			}
			return nil
		})
		for _, k := range odel {
			if err := once.Delete(k); err != nil {
				return err
			}
		}
		return purgeMarks(tx, now)
	})
	return n, notify.Unavailable("purge", err)
}

func (o *Outbox) SlackUser(ctx context.Context, email string) (string, bool, error) {
	var id string
	err := o.db().View(func(tx *bolt.Tx) error {
		id = string(tx.Bucket(bucketUsers).Get([]byte(strings.ToLower(email))))
		return nil
	})
	return id, id != "", notify.Unavailable("slack user", err)
}

func (o *Outbox) SetSlackUser(ctx context.Context, email, userID string) error {
	return notify.Unavailable("set slack user", o.db().Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketUsers).Put([]byte(strings.ToLower(email)), []byte(userID))
	}))
}

// AboutDestination implements notify.Outbox: the outages share the keys'
// index under namespace "".
func (o *Outbox) AboutDestination(ctx context.Context, dest string, limit int) ([]*notify.Record, error) {
	return o.AboutKey(ctx, "", dest, limit)
}

// AboutKey implements notify.Outbox, newest first.
func (o *Outbox) AboutKey(ctx context.Context, namespace, key string, limit int) ([]*notify.Record, error) {
	var out []*notify.Record
	err := o.db().View(func(tx *bolt.Tx) error {
		prefix := keyIndex(namespace, key, "")
		c := tx.Bucket(bucketKeys).Cursor()
		var ids []string
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			ids = append(ids, string(k[len(prefix):]))
		}
		for i := len(ids) - 1; i >= 0 && len(out) < limit; i-- {
			r, err := getRecord(tx, ids[i])
			if err != nil {
				return err
			}
			if r != nil {
				out = append(out, r)
			}
		}
		return nil
	})
	return out, notify.Unavailable("about key", err)
}

// FirstUse implements notify.Outbox: the mark is kept until it expires
// (Purge drops it after), in the same file as the notifications.
func (o *Outbox) FirstUse(ctx context.Context, mark string, now, expires time.Time) (bool, error) {
	first := false
	err := o.db().Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMarks)
		if v := b.Get([]byte(mark)); len(v) == 8 && int64(binary.BigEndian.Uint64(v)) > now.UnixNano() {
			first = false
			return nil
		}
		first = true
		var v [8]byte
		binary.BigEndian.PutUint64(v[:], uint64(expires.UnixNano()))
		return b.Put([]byte(mark), v[:])
	})
	return first, notify.Unavailable("first use", err)
}

func purgeMarks(tx *bolt.Tx, now time.Time) error {
	b := tx.Bucket(bucketMarks)
	var del [][]byte
	_ = b.ForEach(func(k, v []byte) error {
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) <= now.UnixNano() {
			del = append(del, append([]byte(nil), k...))
		}
		return nil
	})
	for _, k := range del {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
