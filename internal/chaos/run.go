//go:build unix

package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/n8n-guard/n8n-guard/internal/linearize"
)

// Namespaces the run uses; Config of the guards must declare both with
// the run's lease (GuardConfig).
const (
	NamespaceReclaim = "chaos-reclaim"
	NamespaceUnknown = "chaos-unknown"
)

// GuardConfig is the guards' configuration file: one namespace whose
// expired leases are reclaimed (the fencing case), one whose go unknown.
func GuardConfig(lease time.Duration) string {
	return fmt.Sprintf("namespaces:\n  %s:\n    lease: %s\n    on_lease_expiry: reclaim\n  %s:\n    lease: %s\n    on_lease_expiry: unknown\n",
		NamespaceReclaim, lease, NamespaceUnknown, lease) + parkingConfig()
}

// Config is one run.
type Config struct {
	Store    string // a name for the summary: bbolt, postgres
	Seed     uint64
	Clients  int
	Duration time.Duration
	Lease    time.Duration // whole seconds
	// KeyOps operations per key before it retires and a new key takes
	// its place; ActiveKeys keys are in play at once. Short histories keep
	// Porcupine's search small.
	KeyOps, ActiveKeys int
	Guards             []*Guard
	Nemeses            []Nemesis
	// Faults come every FaultMin..FaultMax.
	FaultMin, FaultMax time.Duration
	Token              string
	// N8n, when set, runs the parking workload against it too.
	N8n *StandInN8n
	// VisDir keeps the visualisation of a key whose history fails.
	VisDir string
	Log    io.Writer
}

// Summary is what a run did and found.
type Summary struct {
	Store      string
	Seed       uint64
	Operations int
	Unanswered int
	Faults     map[string]int
	Effects    int
	// Parked keys, and executions the stand-in n8n was asked to resume.
	Parked, Resumed int
	Report          linearize.Report
	Wall            time.Duration
	Violations      []string // invariants beside linearizability, and harness errors
	FaultLog        []string
	// First names the failing history that began first: its key, how many
	// operations the run had made by its last one, and the faults before.
	First string
	// Phases says where the wall time went.
	Phases []string
}

// OK tells whether every history was linearizable and every invariant held.
func (s Summary) OK() bool {
	return len(s.Report.Illegal) == 0 && len(s.Report.TimedOut) == 0 && len(s.Violations) == 0
}

func (s Summary) String() string {
	var faults []string
	total := 0
	for k, n := range s.Faults {
		faults = append(faults, fmt.Sprintf("%s×%d", k, n))
		total += n
	}
	sort.Strings(faults)
	b := fmt.Sprintf("%s: seed %d: %d operations (%d unanswered), %d side effects, %d parked and %d resumed, %d faults (%s), %d histories checked in %s, wall %s",
		s.Store, s.Seed, s.Operations, s.Unanswered, s.Effects, s.Parked, s.Resumed, total, strings.Join(faults, " "), s.Report.Histories,
		s.Report.Took.Round(time.Millisecond), s.Wall.Round(time.Second))
	if len(s.Phases) > 0 {
		b += " (" + strings.Join(s.Phases, ", ") + ")"
	}
	if n := len(s.Report.Illegal); n > 0 {
		b += fmt.Sprintf("\n  %d histories NOT LINEARIZABLE; the first to begin: %s", n, s.First)
		for i, f := range s.Report.Illegal {
			if i == 5 {
				b += fmt.Sprintf("\n  … and %d more", n-5)
				break
			}
			b += "\n  NOT LINEARIZABLE: " + f.String()
		}
	}
	if len(s.Report.TimedOut) > 0 {
		b += fmt.Sprintf("\n  check timed out on keys %v", s.Report.TimedOut)
	}
	for _, v := range s.Violations {
		b += "\n  VIOLATION: " + v
	}
	return b
}

// recorder keeps the history and the side effects.
type recorder struct {
	mu      sync.Mutex
	ops     []porcupine.Operation
	effects map[effectKey]int
	errs    []string
}

type effectKey struct {
	key     string
	attempt int
}

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

func (r *recorder) effect(key string, attempt int) {
	r.mu.Lock()
	r.effects[effectKey{key, attempt}]++
	r.mu.Unlock()
}

func (r *recorder) fail(format string, args ...any) {
	r.mu.Lock()
	if len(r.errs) < 20 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
	r.mu.Unlock()
}

// Run runs the clients and the nemeses against cfg.Guards (started) for
// cfg.Duration, heals everything, looks every key up once more and checks.
func Run(ctx context.Context, cfg Config) Summary {
	began := time.Now()
	rec := &recorder{effects: map[effectKey]int{}}
	c := newCaller(cfg.Token, 8*time.Second)
	keys := &keyPool{slots: make([]slot, cfg.ActiveKeys), budget: cfg.KeyOps}

	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	for id := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := &client{id: id, rng: rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1)), cfg: &cfg, c: c, rec: rec, keys: keys,
				held: map[string]held{}, lost: map[string]string{}, old: map[string][]held{}}
			cl.loop(loadCtx)
		}()
	}
	var parked int
	if cfg.N8n != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			parked = runParking(loadCtx, &cfg, c, cfg.N8n, rec)
		}()
	}
	faults := map[string]int{}
	var faultLog []string
	var faultTimes []faultAt
	nemDone := make(chan struct{})
	go func() {
		defer close(nemDone)
		rng := rand.New(rand.NewPCG(cfg.Seed, 0))
		for len(cfg.Nemeses) > 0 {
			wait := cfg.FaultMin + time.Duration(rng.Int64N(int64(cfg.FaultMax-cfg.FaultMin)+1))
			select {
			case <-loadCtx.Done():
				return
			case <-time.After(wait): // the pause between faults is the schedule, not synchronisation
			}
			n := cfg.Nemeses[rng.IntN(len(cfg.Nemeses))]
			at := time.Since(began).Round(10 * time.Millisecond)
			err := n.Do(ctx, rng)
			line := fmt.Sprintf("%s %s", at, n.Name)
			if err != nil {
				line += ": " + err.Error()
				rec.fail("nemesis %s at %s: %v", n.Name, at, err)
			}
			faultLog = append(faultLog, line)
			faultTimes = append(faultTimes, faultAt{at: time.Now().UnixNano(), name: n.Name})
			faults[n.Name]++
			if cfg.Log != nil {
				fmt.Fprintf(cfg.Log, "%s: fault %s\n", cfg.Store, line)
			}
		}
	}()
	wg.Wait()
	phases := []string{"calls " + time.Since(began).Round(time.Second).String()}
	mark := time.Now()
	lap := func(what string) {
		phases = append(phases, what+" "+time.Since(mark).Round(time.Second).String())
		mark = time.Now()
	}
	<-nemDone
	lap("last fault")

	// Heal: every guard serves again, then every key is looked up once
	// more, so an acknowledged write lost in a crash shows.
	for _, h := range healers(cfg) {
		if err := h(ctx); err != nil {
			rec.fail("heal: %v", err)
		}
	}
	lap("heal")
	final := map[string]linearize.Output{}
	for _, s := range keys.all() {
		in := linearize.Input{Kind: linearize.Lookup, Key: s.key, Reclaim: s.reclaim}
		for try := 0; ; try++ {
			call := time.Now().UnixNano()
			out, _, err := c.do(ctx, cfg.Guards[try%len(cfg.Guards)].Base, s.ns(), in, "")
			ret := time.Now().UnixNano()
			if err != nil {
				rec.fail("final lookup: %v", err)
			}
			if !out.Unknown {
				rec.add(linearize.Op(cfg.Clients, in, out, call, ret))
				final[s.key] = out
				break
			}
			if try == 30 {
				rec.fail("final lookup of %s: no answer after 30 tries", s.key)
				break
			}
			time.Sleep(200 * time.Millisecond) // a guard still coming back
		}
	}

	lap("final lookups")
	sum := Summary{Store: cfg.Store, Seed: cfg.Seed, Faults: faults, FaultLog: faultLog, Phases: phases}
	sum.Operations = len(rec.ops)
	for _, op := range rec.ops {
		if op.Output.(linearize.Output).Unknown {
			sum.Unanswered++
		}
	}
	for k, n := range rec.effects {
		sum.Effects += n
		if n > 1 {
			sum.Violations = append(sum.Violations, fmt.Sprintf("key %s attempt %d: %d side effects, at most 1 allowed", k.key, k.attempt, n))
		}
	}
	sum.Violations = append(sum.Violations, durability(rec.ops, final)...)
	if cfg.N8n != nil {
		var twice []string
		sum.Parked = parked
		sum.Resumed, twice = cfg.N8n.report()
		sum.Violations = append(sum.Violations, twice...)
	}
	sum.Violations = append(sum.Violations, rec.errs...)
	sum.Report = linearize.Check(rec.ops, 30*time.Second, cfg.VisDir)
	sum.First = firstFailure(rec.ops, sum.Report.Illegal, began, faultTimes)
	sum.Wall = time.Since(began)
	return sum
}

func healers(cfg Config) []func(context.Context) error {
	var hs []func(context.Context) error
	for _, n := range cfg.Nemeses {
		if n.Heal != nil {
			hs = append(hs, n.Heal)
		}
	}
	for _, g := range cfg.Guards {
		hs = append(hs, g.Heal)
	}
	return hs
}

// durability: every acknowledged reserve, complete and fail is in the
// store after the run. The final lookups are in the history too, so the
// model checks this as well; this says it in the invariant's own words.
func durability(ops []porcupine.Operation, final map[string]linearize.Output) []string {
	var v []string
	type acked struct {
		attempt   int
		completed bool
	}
	byKey := map[string]*acked{}
	for _, op := range ops {
		in, out := op.Input.(linearize.Input), op.Output.(linearize.Output)
		if out.Unknown || in.Kind == linearize.Lookup {
			continue
		}
		a := byKey[in.Key]
		if a == nil {
			a = &acked{}
			byKey[in.Key] = a
		}
		switch {
		case in.Kind == linearize.Reserve && out.Outcome == linearize.OutAccepted, in.Kind == linearize.Complete && out.Outcome == linearize.OutCompleted,
			in.Kind == linearize.Fail && out.Attempt > 0:
			a.attempt = max(a.attempt, out.Attempt)
		}
		if out.Outcome == linearize.OutCompleted {
			a.completed = true
		}
	}
	for k, a := range byKey {
		f, ok := final[k]
		switch {
		case !ok:
			v = append(v, fmt.Sprintf("key %s: no final lookup", k))
		case f.Attempt < a.attempt:
			v = append(v, fmt.Sprintf("key %s: attempt %d acknowledged, the store has %s #%d", k, a.attempt, f.State, f.Attempt))
		case a.completed && f.State != linearize.StCompleted:
			v = append(v, fmt.Sprintf("key %s: completion acknowledged, the store has %s #%d", k, f.State, f.Attempt))
		}
	}
	sort.Strings(v)
	return v
}

type faultAt struct {
	at   int64
	name string
}

// firstFailure describes the failing history that showed first: the
// shortest prefix of a key's history that no order explains, the
// operations the whole run had made by its last answer, and the faults
// before that.
func firstFailure(ops []porcupine.Operation, illegal []linearize.Failure, began time.Time, faults []faultAt) string {
	if len(illegal) == 0 {
		return ""
	}
	byKey := map[string][]porcupine.Operation{}
	for _, f := range illegal {
		byKey[f.Key] = nil
	}
	for _, op := range ops {
		k := op.Input.(linearize.Input).Key
		if _, bad := byKey[k]; bad {
			byKey[k] = append(byKey[k], op)
		}
	}
	first, firstAt, firstN := "", int64(0), 0
	for k, kops := range byKey {
		at, n, ok := linearize.Evidence(kops, 10*time.Second)
		if ok && (first == "" || at < firstAt) {
			first, firstAt, firstN = k, at, n
		}
	}
	if first == "" {
		return "no prefix of a failing history fails on its own"
	}
	before := 0
	for _, op := range ops {
		if op.Call <= firstAt {
			before++
		}
	}
	var names []string
	for _, f := range faults {
		if f.at <= firstAt {
			names = append(names, f.name)
		}
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	return fmt.Sprintf("key %s, whose first %d operations no order explains, shown %s into the run after %d operations; faults before it: %s",
		first, firstN, time.Duration(firstAt-began.UnixNano()).Round(10*time.Millisecond), before, strings.Join(names, ", "))
}
