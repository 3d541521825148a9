//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

// TestQueueMode runs the shipped lead workflow on n8n in queue mode (main,
// two workers, Redis, PostgreSQL) against two guards on one PostgreSQL
// keystore behind a round-robin balancer, and counts CRM writes:
//
//  1. race and lost answers: 10 events x 10 copies sent at once, the
//     answer to the first reserve of three of them lost on the way back;
//     every event is written once, one copy of each is accepted, nobody
//     is paged;
//  2. kills: 10 events x 5 copies with a CRM that answers 1.5 s after it
//     wrote; once writes are in flight one worker and one guard are
//     SIGKILLed. Senders retry as senders do (5xx, 409, no answer) and
//     stop on a decision. An execution killed between its reserve and
//     its complete leaves its key reserved; the lease runs out, the key
//     goes unknown, its owner is paged, and a person checks the CRM and
//     resolves the key: completed if the write is there, else failed, and
//     re-sends the event. Then every event is in the CRM exactly once.
//
// On n8n 1.x the workers are told never to re-run a stalled job
// (QUEUE_WORKER_MAX_STALLED_COUNT=0, what 2.x hard-codes): see
// docs/n8n.md, "Queue mode".
func TestQueueMode(t *testing.T) {
	q := startQueueStack(t)
	t.Run("race and lost answers", q.caseRaceAndLostAnswers)
	t.Run("worker and guard killed mid-run", q.caseKills)
}

// eventKeys are n event ids with a prefix.
func eventKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%02d", prefix, i+1)
	}
	return keys
}

// post sends one event to the lead webhook of main; a transport error
// (no answer) is returned, not fatal: senders retry it.
func (q *queueStack) post(ctx context.Context, key string) (reply, error) {
	b, _ := json.Marshal(lead(key, "queue@example.org"))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, q.n8n.URL()+"/webhook/"+leadPath, bytes.NewReader(b))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := q.web.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{Status: resp.StatusCode, Header: resp.Header, Raw: strings.TrimSpace(string(raw))}
	_ = json.Unmarshal(raw, &r)
	return r, nil
}

// 1. Many copies of each event at once, some reserve answers lost.
func (q *queueStack) caseRaceAndLostAnswers(t *testing.T) {
	const copies = 10
	keys := eventKeys("q-race", 10)
	lost := keys[:3]
	q.balancer.Lose(lost...)
	started := time.Now()

	replies := map[string][]reply{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, key := range keys {
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := q.post(context.Background(), key)
				if err != nil {
					r = reply{Raw: "no answer: " + err.Error()}
				}
				mu.Lock()
				replies[key] = append(replies[key], r)
				mu.Unlock()
			}()
		}
	}
	close(start)
	wg.Wait()
	t.Logf("%d events x %d copies answered in %s", len(keys), copies, time.Since(started).Round(time.Second))

	for _, key := range keys {
		codes := map[string]int{}
		var ref string
		for _, r := range replies[key] {
			codes[fmt.Sprint(r.Status, " ", r.Code)]++
			switch {
			case r.Status == 200 && r.Code == "accepted":
				ref = r.Ref
			case r.Status == 200 && r.Code == "duplicate_event":
			case r.Status == 409 && r.Code == "in_progress":
			default:
				t.Errorf("%s: unexpected answer %s", key, r)
			}
		}
		if w := q.crm.Writes(key); w != 1 {
			t.Errorf("%s: CRM writes = %d, want 1 (answers %v)", key, w, codes)
		}
		if codes["200 accepted"] != 1 {
			t.Errorf("%s: %d copies accepted, want 1 (answers %v)", key, codes["200 accepted"], codes)
		}
		for _, r := range replies[key] {
			if r.Code == "duplicate_event" && r.Ref != ref {
				t.Errorf("%s: a duplicate answered result_ref %q, the write %q", key, r.Ref, ref)
			}
		}
		rec := q.record(t, key)
		if rec.State != "completed" || rec.Attempt != 1 || rec.ResultRef != ref {
			t.Errorf("%s: record %+v, want completed, attempt 1, result_ref %q", key, rec, ref)
		}
		reserves, dropped := q.balancer.Counts(key)
		t.Logf("%s: %d copies -> %d CRM write(s); answers %v; balancer: %d reserves, %d answers lost", key, copies, q.crm.Writes(key), codes, reserves, dropped)
	}
	for _, key := range lost {
		if reserves, dropped := q.balancer.Counts(key); dropped != 1 || reserves < 2 {
			t.Errorf("%s: the balancer lost %d answers of %d reserves, want 1 lost and its repeat", key, dropped, reserves)
		}
	}
	if unknown := q.keys(t, "unknown"); len(unknown) != 0 {
		t.Errorf("keys unknown after the race: %+v", unknown)
	}
	if msgs := q.slack.Messages(); len(msgs) != 0 {
		t.Errorf("someone was paged during the race: %+v", msgs)
	}
}

// delivery is what one sender went through for one copy of an event.
type delivery struct {
	key     string
	final   reply
	answers []string // every answer (or "no answer") in order
}

// deliver sends one copy the way a webhook sender with retries does: a
// decision ends it (200 accepted or duplicate_event, 202 state_unknown:
// "a person is checking, do not resend", any 4xx); 409 in_progress, 5xx
// and no answer at all are sent again after Retry-After (capped at 5 s:
// the test's patience, not the protocol) or 2 s.
func (q *queueStack) deliver(ctx context.Context, key string) delivery {
	d := delivery{key: key}
	for {
		r, err := q.post(ctx, key)
		wait := 2 * time.Second
		switch {
		case err != nil:
			d.answers = append(d.answers, "no answer")
		case r.Status == 409 || r.Status >= 500:
			d.answers = append(d.answers, fmt.Sprint(r.Status, " ", r.Code))
			if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err == nil && s > 0 {
				wait = min(time.Duration(s)*time.Second, 5*time.Second)
			}
		default:
			d.answers = append(d.answers, fmt.Sprint(r.Status, " ", r.Code))
			d.final = r
			return d
		}
		select {
		case <-ctx.Done():
			d.final = reply{Raw: "gave up: " + ctx.Err().Error()}
			return d
		case <-time.After(wait):
		}
	}
}

// 2. One worker and one guard killed while writes are in flight.
func (q *queueStack) caseKills(t *testing.T) {
	const copies = 5
	keys := eventKeys("q-kill", 10)
	q.crmFront.SetDelay(1500 * time.Millisecond)
	defer q.crmFront.SetDelay(0)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	started := time.Now()

	var mu sync.Mutex
	var deliveries []delivery
	var wg sync.WaitGroup
	for _, key := range keys {
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := q.deliver(ctx, key)
				mu.Lock()
				deliveries = append(deliveries, d)
				mu.Unlock()
			}()
		}
	}

	// The kill: once writes are taken and their answers held (or, on a
	// machine too loaded for that, once a few are done).
	testwait.Poll(8*time.Minute, func() bool { return q.crmFront.InFlight() >= 3 || q.writes(keys) >= 4 || ctx.Err() != nil })
	inFlight, writes := q.crmFront.InFlight(), q.writes(keys)
	q.workers[0].Kill()
	q.guards[0].Kill()
	when := fmt.Sprintf("after %s, with %d CRM writes taken (%d answers held)", time.Since(started).Round(100*time.Millisecond), writes, inFlight)
	wg.Wait()
	t.Logf("worker 1 and guard 1 SIGKILLed %s; all senders had a decision after %s", when, time.Since(started).Round(time.Second))

	byKey := map[string][]delivery{}
	failures := 0 // answers that were a failure, not a decision
	for _, d := range deliveries {
		byKey[d.key] = append(byKey[d.key], d)
		for _, a := range d.answers {
			if a == "no answer" || strings.HasPrefix(a, "5") {
				failures++
			}
		}
		switch {
		case d.final.Status == 200 && (d.final.Code == "accepted" || d.final.Code == "duplicate_event"):
		case d.final.Status == 202 && d.final.Code == "state_unknown":
		default:
			t.Errorf("%s: the sender ended on %s after %v", d.key, d.final, d.answers)
		}
	}
	for _, key := range keys {
		var seen []string
		for _, d := range byKey[key] {
			seen = append(seen, strings.Join(d.answers, " > "))
		}
		t.Logf("%s: %s", key, strings.Join(seen, " | "))
	}

	// The person: the namespace's owner is paged (keys going unknown
	// together are one message with their count); they list the unknown
	// keys, look each lead up in the CRM and resolve the key by what they
	// find.
	unknown := q.keys(t, "unknown")
	if len(unknown) > 0 {
		q.waitSlack(t, 2*time.Minute, "crm-contacts", "a person", "U0CRMOWNER") // "needs a person", or a group's "need a person"
	}
	var resolvedDone, resolvedResent []string
	for _, rec := range unknown {
		switch q.crm.Writes(rec.Key) {
		case 1:
			q.resolve(t, rec.Key, "completed", "the lead is in the CRM")
			resolvedDone = append(resolvedDone, rec.Key)
		case 0:
			q.resolve(t, rec.Key, "failed", "the lead is not in the CRM; sent again")
			r, err := q.post(ctx, rec.Key)
			if err != nil || r.Status != 200 || r.Code != "accepted" {
				t.Errorf("%s: after resolving it failed, the resend answered %s (%v), want 200 accepted", rec.Key, r, err)
			}
			resolvedResent = append(resolvedResent, rec.Key)
		default:
			t.Errorf("%s: unknown with %d CRM writes", rec.Key, q.crm.Writes(rec.Key))
		}
	}

	for _, key := range keys {
		if w := q.crm.Writes(key); w != 1 {
			t.Errorf("%s: CRM writes = %d, want exactly 1", key, w)
		}
		if rec := q.record(t, key); rec.State != "completed" {
			t.Errorf("%s: record %+v, want completed", key, rec)
		}
	}
	if left := q.keys(t, "reserved"); len(left) != 0 {
		t.Errorf("keys still reserved: %+v", left)
	}
	cut, skipped := q.balancer.Failovers()
	t.Logf("FIGURE queue mode, %d events x %d copies, worker and guard killed %s: %d failed answers retried by senders; "+
		"%d keys went unknown (%d resolved completed, %d resolved failed and re-sent); balancer: %d answers cut, %d requests moved off the dead guard; CRM writes %d",
		len(keys), copies, when, failures, len(unknown), len(resolvedDone), len(resolvedResent), cut, skipped, q.writes(keys))
	if failures == 0 && len(unknown) == 0 && cut == 0 {
		t.Errorf("the kill hit nothing in flight: no failed answer, no unknown key, no cut answer; the scenario did not happen")
	}
}

// writes counts CRM writes over keys.
func (q *queueStack) writes(keys []string) int {
	n := 0
	for _, k := range keys {
		n += q.crm.Writes(k)
	}
	return n
}

// survivor is the guard that was not killed.
func (q *queueStack) survivor() *guard { return q.guards[1] }

func (q *queueStack) record(t *testing.T, key string) record {
	t.Helper()
	rec, err := q.survivor().Lookup("crm-contacts", key)
	if err != nil {
		t.Fatalf("lookup %s: %v", key, err)
	}
	return rec
}

// keys lists the records of crm-contacts in state.
func (q *queueStack) keys(t *testing.T, state string) []record {
	t.Helper()
	var page struct {
		Items []record `json:"items"`
	}
	v := url.Values{"namespace": {"crm-contacts"}, "state": {state}, "limit": {"1000"}}
	if err := q.survivor().api.Do(context.Background(), http.MethodGet, "/v1/keys?"+v.Encode(), nil, &page); err != nil {
		t.Fatal(err)
	}
	return page.Items
}

func (q *queueStack) resolve(t *testing.T, key, resolution, note string) {
	t.Helper()
	body := map[string]any{"namespace": "crm-contacts", "key": key, "resolution": resolution, "by": "crm owner", "note": note}
	if resolution == "completed" {
		body["result_ref"] = "found in the CRM"
	}
	var rec record
	err := q.survivor().api.Do(context.Background(), http.MethodPost, "/v1/resolve", body, &rec)
	if err != nil || rec.State != resolution {
		t.Fatalf("resolve %s %s: %+v %v", key, resolution, rec, err)
	}
}
