//go:build unix

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/linearize"
)

// slot is one key in play.
type slot struct {
	key     string
	reclaim bool
	ops     int
}

func (s slot) ns() string {
	if s.reclaim {
		return NamespaceReclaim
	}
	return NamespaceUnknown
}

// keyPool keeps ActiveKeys keys in play; a key retires after budget
// operations and a new one takes its slot, so each key's history is short
// and concurrent.
type keyPool struct {
	mu     sync.Mutex
	slots  []slot
	budget int
	seen   []slot
}

func (p *keyPool) pick(rng *rand.Rand) slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := rng.IntN(len(p.slots))
	if p.slots[i].key == "" || p.slots[i].ops >= p.budget {
		p.slots[i] = slot{key: fmt.Sprintf("k%d", len(p.seen)+1), reclaim: rng.IntN(2) == 0}
		p.seen = append(p.seen, p.slots[i])
	}
	p.slots[i].ops++
	return p.slots[i]
}

func (p *keyPool) all() []slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]slot(nil), p.seen...)
}

// held is a token a client holds: it did the side effect of its attempt.
type held struct {
	attempt int
	token   string
	reqID   string
}

// client is one workflow execution after another, as n8n runs them:
// reserve, the side effect, complete or fail; sometimes it repeats a
// reserve whose answer it lost (Retry On Fail), abandons its lease (a
// crashed execution), reports with a superseded token (an execution that
// was paused past its lease), looks a key up, or resolves it as a person.
type client struct {
	id   int
	rng  *rand.Rand
	cfg  *Config
	c    *caller
	rec  *recorder
	keys *keyPool
	held map[string]held   // key -> the token this client holds
	lost map[string]string // key -> request_id of a reserve whose answer was lost
	old  map[string][]held // key -> tokens this client gave up
	n    int
}

func (cl *client) loop(ctx context.Context) {
	for ctx.Err() == nil {
		s := cl.keys.pick(cl.rng)
		cl.act(ctx, s)
	}
}

var failReasons = []string{"destination_failed", "destination_failed", "destination_unreachable", "validation_failed", "outcome_unknown"}

// dies is the end of the execution that holds h on key: its lease runs
// out. A re-sent reserve of its own whose answer it lost dies with it:
// sent again, the guard answers it as the repeat it is (accepted again,
// the same token, no write), and the checker would count a second write
// of the attempt that no second execution made.
func (cl *client) dies(key string, h held) {
	delete(cl.held, key)
	if cl.lost[key] == h.reqID {
		delete(cl.lost, key)
	}
	cl.old[key] = append(cl.old[key], h)
}

func (cl *client) act(ctx context.Context, s slot) {
	in := linearize.Input{Key: s.key, Reclaim: s.reclaim, Lease: int64(cl.cfg.Lease)}
	r := cl.rng.Float64()
	h, holding := cl.held[s.key]
	switch {
	case holding && r < 0.55:
		in.Kind, in.Attempt = linearize.Complete, h.attempt
	case holding && r < 0.75:
		in.Kind, in.Attempt, in.Reason = linearize.Fail, h.attempt, failReasons[cl.rng.IntN(len(failReasons))]
	case holding && r < 0.85:
		in.Kind, in.ReqID = linearize.Reserve, h.reqID
	case holding && r < 0.92:
		cl.dies(s.key, h)
		return
	case holding:
		in.Kind = linearize.Lookup
	case cl.lost[s.key] != "" && r < 0.5:
		in.Kind, in.ReqID = linearize.Reserve, cl.lost[s.key]
	case r < 0.6:
		cl.n++
		in.Kind, in.ReqID = linearize.Reserve, fmt.Sprintf("c%d-%d", cl.id, cl.n)
	case r < 0.8:
		in.Kind = linearize.Lookup
	case r < 0.9:
		cl.n++
		in.Kind, in.Resolution, in.ReqID = linearize.Resolve, []string{linearize.StCompleted, linearize.StFailed}[cl.rng.IntN(2)], fmt.Sprintf("c%d-%d", cl.id, cl.n)
	case len(cl.old[s.key]) > 0:
		h = cl.old[s.key][cl.rng.IntN(len(cl.old[s.key]))]
		in.Kind, in.Attempt = linearize.Complete, h.attempt
		if cl.rng.IntN(2) == 0 {
			in.Kind, in.Reason = linearize.Fail, failReasons[cl.rng.IntN(len(failReasons))]
		}
	default:
		in.Kind = linearize.Lookup
	}
	g := cl.cfg.Guards[cl.rng.IntN(len(cl.cfg.Guards))]
	call := time.Now().UnixNano()
	out, token, err := cl.c.do(context.WithoutCancel(ctx), g.Base, s.ns(), in, h.token)
	ret := time.Now().UnixNano()
	if err != nil {
		cl.rec.fail("client %d: %v", cl.id, err)
	}
	cl.rec.add(linearize.Op(cl.id, in, out, call, ret))
	if out.Unknown {
		// A workflow waits before it retries (n8n's Retry On Fail waits
		// 1 s): without it a guard that is down answers thousands of calls
		// a second, each one open for good in its key's history.
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(300+cl.rng.IntN(700)) * time.Millisecond):
		}
	}

	switch in.Kind {
	case linearize.Reserve:
		switch {
		case out.Unknown:
			cl.lost[s.key] = in.ReqID
		case out.Outcome == linearize.OutAccepted:
			delete(cl.lost, s.key)
			if cur, ok := cl.held[s.key]; !ok || cur.attempt != out.Attempt {
				// A token this client did not hold yet: the workflow's write.
				cl.rec.effect(s.key, out.Attempt)
			}
			cl.held[s.key] = held{attempt: out.Attempt, token: token, reqID: in.ReqID}
		default:
			delete(cl.lost, s.key)
		}
	case linearize.Complete, linearize.Fail:
		if !out.Unknown && holding && h.attempt == cl.held[s.key].attempt {
			delete(cl.held, s.key)
			cl.old[s.key] = append(cl.old[s.key], h)
		}
	}
}
