//go:build unix

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// The parking workload: a destination that goes down again and again,
// keys parked with a resume URL while it is down, and a stand-in n8n whose
// waiting webhooks record every resume call. Invariant: a parked key's
// resume URL is called at most once per parking (each parking has a URL
// of its own, as each n8n execution has).
const (
	NamespaceParked   = "chaos-parked"
	DestinationParked = "crm-parked"
)

// parkingConfig is the part of the guards' configuration the parking
// workload needs: the destination's breaker opens on one unreachable
// failure and probes again after 2 s.
func parkingConfig() string {
	return fmt.Sprintf("  %s:\n    lease: 10s\ndestinations:\n  %s:\n    cooldown: 2s\n    failure_threshold: 5\n    unreachable_threshold: 1\n",
		NamespaceParked, DestinationParked)
}

// StandInN8n answers resume calls as n8n's waiting webhooks do: the first
// call wakes the execution (200), which then reserves its key again and
// completes it; a later call is 409 "has finished already".
type StandInN8n struct {
	Origin string
	srv    *http.Server

	mu    sync.Mutex
	calls map[string]int    // execution id -> resume calls received
	keys  map[string]string // execution id -> its key
	woken func(key string)  // the resumed execution's run
}

// NewStandInN8n listens on a free loopback port.
func NewStandInN8n() (*StandInN8n, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	n := &StandInN8n{Origin: "http://" + l.Addr().String(), calls: map[string]int{}, keys: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /webhook-waiting/{id}", n.resume)
	n.srv = &http.Server{Handler: mux}
	go n.srv.Serve(l)
	return n, nil
}

func (n *StandInN8n) resume(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	id := r.PathValue("id")
	n.mu.Lock()
	n.calls[id]++
	first, key, woken := n.calls[id] == 1, n.keys[id], n.woken
	n.mu.Unlock()
	if !first {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, `{"code":409,"message":"The execution \"%s\" has finished already."}`, id)
		return
	}
	w.WriteHeader(http.StatusOK)
	if woken != nil && key != "" {
		go woken(key)
	}
}

// expect names the key of an execution that may be resumed.
func (n *StandInN8n) expect(id, key string) {
	n.mu.Lock()
	n.keys[id] = key
	n.mu.Unlock()
}

// Close stops the stand-in.
func (n *StandInN8n) Close() { n.srv.Close() }

// runParking drives the parking workload until ctx ends and returns how
// many keys it parked.
func runParking(ctx context.Context, cfg *Config, c *caller, n *StandInN8n, rec *recorder) int {
	var (
		mu     sync.Mutex
		parked = map[string]string{} // execution id -> key
		seq    int
	)
	next := func() int {
		mu.Lock()
		defer mu.Unlock()
		seq++
		return seq
	}
	guard := func(rng *rand.Rand) string { return cfg.Guards[rng.IntN(len(cfg.Guards))].Base }
	// The woken execution reserves its key again and completes it.
	n.mu.Lock()
	n.woken = func(key string) {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(len(key))))
		for try := 0; try < 20 && ctx.Err() == nil; try++ {
			a, status, err := c.post(context.WithoutCancel(ctx), guard(rng), "reserve", map[string]any{"namespace": NamespaceParked, "key": key, "owner": "woken", "destination": DestinationParked})
			if err == nil && status == 200 {
				if a.Outcome == "accepted" {
					c.post(context.WithoutCancel(ctx), guard(rng), "complete", map[string]any{"namespace": NamespaceParked, "key": key, "token": a.Token})
				}
				return
			}
			time.Sleep(300 * time.Millisecond) // a guard coming back
		}
	}
	n.mu.Unlock()

	var wg sync.WaitGroup
	// The outage: one key's write finds the destination unreachable now
	// and then, which opens its breaker for the cooldown.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(cfg.Seed, 1000))
		for ctx.Err() == nil {
			key := fmt.Sprintf("trip%d", next())
			a, status, err := c.post(ctx, guard(rng), "reserve", map[string]any{"namespace": NamespaceParked, "key": key, "owner": "trip", "destination": DestinationParked})
			if err == nil && status == 200 && a.Outcome == "accepted" {
				c.post(ctx, guard(rng), "fail", map[string]any{"namespace": NamespaceParked, "key": key, "token": a.Token, "reason": "destination_unreachable"})
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(3000+rng.IntN(3000)) * time.Millisecond): // the next outage
			}
		}
	}()
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(cfg.Seed, uint64(2000+i)))
			for ctx.Err() == nil {
				id := fmt.Sprintf("%d", next())
				key := "p" + id
				n.expect(id, key)
				a, status, err := c.post(ctx, guard(rng), "reserve", map[string]any{"namespace": NamespaceParked, "key": key, "owner": "n8n wf exec " + id,
					"destination": DestinationParked, "resume_url": n.Origin + "/webhook-waiting/" + id})
				switch {
				case err != nil || status >= 500:
				case status != 200:
					rec.fail("parking reserve %s: %d %+v", key, status, a)
				case a.Outcome == "parked":
					mu.Lock()
					parked[id] = key
					mu.Unlock()
				case a.Outcome == "accepted":
					c.post(ctx, guard(rng), "complete", map[string]any{"namespace": NamespaceParked, "key": key, "token": a.Token})
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(100+rng.IntN(300)) * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return len(parked)
}

// report says how many executions were resumed, and which resume URLs
// were called more than once.
func (n *StandInN8n) report() (resumed int, twice []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, calls := range n.calls {
		resumed++
		if calls > 1 {
			twice = append(twice, fmt.Sprintf("resume URL of %s (execution %s) called %d times, at most once per parking", n.keys[id], id, calls))
		}
	}
	sort.Strings(twice)
	return resumed, twice
}

// post is a plain call for the parking workload (not part of the
// linearizability history: the model has no parked state).
func (c *caller) post(ctx context.Context, base, route string, body map[string]any) (answer, int, error) {
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/"+route, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.http.Do(req)
	if err != nil {
		return answer{}, 0, err
	}
	defer res.Body.Close()
	var a answer
	b, _ := io.ReadAll(res.Body)
	json.Unmarshal(b, &a)
	if res.StatusCode != 200 && a.Code == "" {
		a.Code = strings.TrimSpace(string(b))
	}
	return a, res.StatusCode, nil
}
