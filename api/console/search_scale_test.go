package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// countingStore counts what the console reads: the records List returns
// (a walk of every key returns every key) and the lookups. Its Select
// walks the counted List with the filter's namespace and prefix, as a
// store's index would, so what is measured is the console's plan: which
// ranges it asks for, not how a store reads one.
type countingStore struct {
	keystore.Store
	lists, listed, lookups atomic.Int64
}

func (s *countingStore) Select(ctx context.Context, f keystore.Filter, cursor string, limit int) (keystore.Page, error) {
	q := keystore.ListQuery{Namespace: f.Namespace, Cursor: cursor, Limit: limit}
	if f.Namespace != "" {
		q.KeyPrefix = f.KeyPrefix
	}
	if len(f.States) == 1 {
		q.State = f.States[0]
	}
	var out keystore.Page
	for {
		page, err := s.List(ctx, q)
		if err != nil {
			return keystore.Page{}, err
		}
		for _, r := range page.Items {
			if f.Match(r) {
				out.Items = append(out.Items, r)
			}
		}
		if page.NextCursor == "" || len(out.Items) >= limit {
			out.NextCursor = page.NextCursor
			return out, nil
		}
		q.Cursor = page.NextCursor
	}
}

func (s *countingStore) List(ctx context.Context, q keystore.ListQuery) (keystore.Page, error) {
	p, err := s.Store.List(ctx, q)
	s.lists.Add(1)
	s.listed.Add(int64(len(p.Items)))
	return p, err
}

func (s *countingStore) Lookup(ctx context.Context, ns, key string) (keystore.Result, error) {
	s.lookups.Add(1)
	return s.Store.Lookup(ctx, ns, key)
}

func (s *countingStore) reset() { s.lists.Store(0); s.listed.Store(0); s.lookups.Store(0) }

const scaleKeys = 50_000

var scaleNamespaces = []string{"bookings", "crm-contacts", "hubspot", "invoices", "newsletter"}

func scaleKey(i int) (ns, key string) {
	return scaleNamespaces[i%len(scaleNamespaces)], fmt.Sprintf("evt_%016x", uint64(i)*0x9E3779B97F4A7C15)
}

// A key or a prefix searched without its namespace reads the prefix's
// range in each namespace, never every key: 50,000 keys in 5 namespaces.
func TestSearchWithoutNamespaceDoesNotWalkEveryKey(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 50,000 keys")
	}
	inner, err := bolt.Open(filepath.Join(t.TempDir(), "guard.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i <= scaleKeys; i = int(next.Add(1)) {
				ns, key := scaleKey(i)
				r, err := inner.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: "n8n LeadCrm exec " + strconv.Itoa(i)})
				if err == nil {
					if i%100 == 7 {
						_, err = inner.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: r.Token, Reason: keystore.ReasonOutcomeUnknown})
					} else {
						_, err = inner.Complete(ctx, keystore.CompleteRequest{Namespace: ns, Key: key, Token: r.Token})
					}
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: inner}
	s, stop, err := serve(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	s.t = t
	// The test counts store calls, not time: under -race on a loaded CI
	// machine a page over 50,000 keys may take longer than the usual 10 s.
	c := client(t)
	c.Timeout = time.Minute
	resp := postForm(t, c, s.url+"/ui/signin", url.Values{"token": {readToken}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	began := time.Now()
	if resp, _ := fetch(t, c, s.url+"/ui"); resp.StatusCode != http.StatusOK {
		t.Fatalf("the overview over %d keys: %d", scaleKeys, resp.StatusCode)
	}
	t.Logf("the overview over %d keys took %v", scaleKeys, time.Since(began).Round(time.Millisecond))

	// Every key that begins with the prefix, the slow way, for the answer.
	_, someKey := scaleKey(4242)
	prefix := someKey[:7] // "evt_" and three hex digits: about 12 keys of 50,000
	var want []string
	for i := 1; i <= scaleKeys; i++ {
		if ns, key := scaleKey(i); strings.HasPrefix(key, prefix) {
			want = append(want, ns+"/"+key)
		}
	}
	for _, tc := range []struct {
		name               string
		q                  url.Values
		want               []string
		maxListed, maxLook int64
	}{
		{"a prefix without namespace", url.Values{"key_prefix": {prefix}}, want, int64(len(want)), 0},
		{"an exact key without namespace", url.Values{"key_prefix": {someKey}, "match": {"exact"}},
			[]string{scaleNamespaces[4242%len(scaleNamespaces)] + "/" + someKey}, 0, int64(len(scaleNamespaces))},
		{"a prefix and a state", url.Values{"key_prefix": {prefix}, "state": {"completed"}}, nil, int64(len(want)), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store.reset()
			tc.q.Set("search", "1")
			resp, page := fetch(t, c, s.url+"/ui/keys?"+tc.q.Encode())
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			got := results(t, page)
			if tc.want != nil && !sameSet(got, tc.want...) {
				t.Fatalf("found %v, want %v", got, tc.want)
			}
			if len(got) == 0 {
				t.Fatal("found nothing")
			}
			t.Logf("%s: %d found; %d List calls returned %d records; %d lookups", tc.name, len(got), store.lists.Load(), store.listed.Load(), store.lookups.Load())
			if store.listed.Load() > tc.maxListed || store.lookups.Load() > tc.maxLook {
				t.Errorf("the search read %d records and looked up %d keys of %d: want at most %d and %d",
					store.listed.Load(), store.lookups.Load(), scaleKeys, tc.maxListed, tc.maxLook)
			}
		})
	}
}
