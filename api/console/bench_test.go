package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// The console's pages on a store of a million keys (CONSOLE_BENCH_KEYS
// lowers it for a quick look), written the production way: reserve then
// complete, 64 callers. One key in 200 is left unknown and one in 200
// failed; owners are "n8n exec <n>", 100 keys each; three namespaces.
// Each benchmark is one page over HTTP on loopback, signed in:
//
//	go test -run XXX -bench Console -benchtime 200x ./api/console/

var bench struct {
	once sync.Once
	site *site
	c    *http.Client
	dir  string
	err  error
}

func benchKeys(b *testing.B) int {
	if v := os.Getenv("CONSOLE_BENCH_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}
	return 1_000_000
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.site != nil {
		bench.site.store.Close()
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

func benchKey(i int) (ns, key string) {
	return []string{"crm-contacts", "bookings", "invoices"}[i%3], fmt.Sprintf("evt_%016x", uint64(i)*0x9E3779B97F4A7C15)
}

func loadedSite(b *testing.B) (*site, *http.Client) {
	b.Helper()
	bench.once.Do(func() {
		n := benchKeys(b)
		if bench.dir, bench.err = os.MkdirTemp("", "n8n-guard-console-bench"); bench.err != nil {
			return
		}
		store, err := bolt.Open(filepath.Join(bench.dir, "guard.db"), bolt.Options{})
		if err != nil {
			bench.err = err
			return
		}
		start := time.Now()
		ctx := context.Background()
		var next atomic.Int64
		var wg sync.WaitGroup
		var failed atomic.Pointer[error]
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1))
					if i > n || failed.Load() != nil {
						return
					}
					ns, key := benchKey(i)
					r, err := store.Reserve(ctx, keystore.ReserveRequest{Namespace: ns, Key: key, Owner: "n8n exec " + strconv.Itoa(i/100)})
					if err == nil {
						switch i % 200 {
						case 7:
							_, err = store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: r.Token, Reason: keystore.ReasonOutcomeUnknown})
						case 11:
							_, err = store.Fail(ctx, keystore.FailRequest{Namespace: ns, Key: key, Token: r.Token, Reason: keystore.ReasonDestinationFailed})
						default:
							_, err = store.Complete(ctx, keystore.CompleteRequest{Namespace: ns, Key: key, Token: r.Token, ResultRef: "crm-" + strconv.Itoa(i)})
						}
					}
					if err != nil {
						failed.Store(&err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if p := failed.Load(); p != nil {
			bench.err = *p
			return
		}
		fmt.Fprintf(os.Stderr, "console bench: %d keys written in %s\n", n, time.Since(start).Round(time.Second))
		if bench.site, _, bench.err = serve(store); bench.err != nil {
			return
		}
		bench.c = client(b)
		resp, err := bench.c.PostForm(bench.site.url+"/ui/signin", url.Values{"token": {actToken}})
		if err != nil {
			bench.err = err
			return
		}
		resp.Body.Close()
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.site, bench.c
}

func benchPage(b *testing.B, path string) {
	s, c := loadedSite(b)
	benchPageOn(b, s, c, path)
}

func benchPageOn(b *testing.B, s *site, c *http.Client, path string) {
	b.ResetTimer()
	for range b.N {
		resp, err := c.Get(s.url + path)
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %d\n%.500s", path, resp.StatusCode, body)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
}

func BenchmarkConsoleOverview(b *testing.B) { benchPage(b, "/ui") }

func BenchmarkConsoleSearchPrefix(b *testing.B) {
	benchPage(b, "/ui/keys?search=1&namespace=bookings&key=evt_3a&match=prefix")
}

func BenchmarkConsoleSearchExact(b *testing.B) {
	ns, key := benchKey(4242)
	benchPage(b, "/ui/keys?"+url.Values{"search": {"1"}, "namespace": {ns}, "key": {key}, "match": {"exact"}}.Encode())
}

func BenchmarkConsoleSearchOwner(b *testing.B) {
	benchPage(b, "/ui/keys?search=1&owner=n8n+exec+4242")
}

func BenchmarkConsoleSearchUnknown(b *testing.B) {
	benchPage(b, "/ui/keys?search=1&state=unknown")
}

func BenchmarkConsoleSearchCompletedInNamespace(b *testing.B) {
	benchPage(b, "/ui/keys?search=1&namespace=invoices&state=completed")
}

func BenchmarkConsoleKeyPage(b *testing.B) {
	ns, key := benchKey(7) // unknown: the page with the decision form
	benchPage(b, "/ui/key?"+url.Values{"namespace": {ns}, "key": {key}}.Encode())
}
