package outboxtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/notify"
)

// groupMembers: the keys of a group of stuck keys are kept with its head,
// listed in order by pages, each settled once (also by racing callers),
// and dropped with the head.
func groupMembers(t *testing.T, open Open) {
	ctx := context.Background()
	o := open(t)
	const n = 7
	member := func(i int) *notify.Member {
		return &notify.Member{Namespace: "ns", Key: fmt.Sprintf("k%02d", i), Attempt: 1 + i%2}
	}
	var head string
	for i := range n {
		r := keyRec(t0.Add(time.Duration(i)*time.Second), i, "ns", member(i).Key, member(i).Attempt)
		r.Group = "keys-ns"
		res := add(t, o, notify.Addition{Record: r, Window: time.Minute, Member: member(i)})
		if i == 0 {
			head = res[0].Record.ID
		} else if !res[0].Joined || res[0].Record.ID != head {
			t.Fatalf("key %d did not join the group: %+v", i, res[0])
		}
	}
	// An outside key of another group is no member of this one.
	other := keyRec(t0.Add(time.Hour), 99, "ns", "other", 1)
	other.Group = "keys-ns"
	add(t, o, notify.Addition{Record: other, Window: time.Minute, Member: &notify.Member{Namespace: "ns", Key: "other", Attempt: 1}})

	var all []notify.Member
	var after *notify.Member
	for {
		page, err := o.Members(ctx, head, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 3 {
			break
		}
		after = &page[len(page)-1]
	}
	if len(all) != n {
		t.Fatalf("members: %+v, want %d", all, n)
	}
	for i, m := range all {
		if want := *member(i); m != want {
			t.Fatalf("member %d: %+v, want %+v", i, m, want)
		}
	}

	// Settled once: racing callers (two replicas reading one event) count it once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := o.Settle(ctx, *member(3), func(h *notify.Record) { h.Settled++ })
			if err != nil {
				t.Error(err)
			}
			if r != nil {
				mu.Lock()
				applied++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if h := get(t, o, head); applied != 1 || h.Settled != 1 || h.Count != n {
		t.Fatalf("one key settled by 6 racing callers: applied %d, head settled %d count %d", applied, h.Settled, h.Count)
	}
	if r, err := o.Settle(ctx, notify.Member{Namespace: "ns", Key: "k03", Attempt: 9}, func(h *notify.Record) { h.Settled++ }); r != nil || err != nil {
		t.Fatalf("an attempt that is no member settled: %v %v", r, err)
	}
	page, _ := o.Members(ctx, head, nil, 10)
	if !page[3].Settled || page[2].Settled {
		t.Fatalf("settled flags: %+v", page)
	}

	// Purged with the head.
	if _, err := o.Update(ctx, head, func(r *notify.Record) {
		d := r.CreatedAt
		r.Status, r.DueAt, r.DeliveredAt = notify.StatusDelivered, time.Time{}, &d
	}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(41 * 24 * time.Hour)
	if _, err := o.Purge(ctx, now.Add(-30*24*time.Hour), now, 100); err != nil {
		t.Fatal(err)
	}
	if get(t, o, head) != nil {
		t.Fatal("the head was not purged")
	}
	if page, err := o.Members(ctx, head, nil, 10); err != nil || len(page) != 0 {
		t.Fatalf("members of a purged head: %+v %v", page, err)
	}
	if r, _ := o.Settle(ctx, *member(4), func(h *notify.Record) { h.Settled++ }); r != nil {
		t.Fatal("a member of a purged head settled")
	}
}
