package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"text/tabwriter"
)

// report reads the JSON lines of runs (guard-bench --json) and prints one
// table: per scenario, each label's throughput and latency (the median of
// its runs), and its ratio to the base label and to the no-op route
// (/healthz) of the same file.
func report(args []string) error {
	fs := flag.NewFlagSet("guard-bench report", flag.ContinueOnError)
	base := fs.String("base", "bbolt", "label the ratios are taken against")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: guard-bench report [--base LABEL] results.jsonl")
	}
	runs, err := readRuns(fs.Arg(0))
	if err != nil {
		return err
	}
	groups := groupRuns(runs)
	var healthz float64
	baseOf := map[string]float64{}
	for _, g := range groups {
		if g.scenario == "healthz" && healthz == 0 {
			healthz = g.median(rps)
		}
		if g.label == *base {
			baseOf[g.scenario] = g.median(rps)
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "scenario\tlabel\truns\treq/s\t(min-max)\tp50 ms\tp95 ms\tp99 ms\terrors\tvs %s\tvs healthz\t\n", *base)
	for _, g := range groups {
		errs, lo, hi := 0, math.Inf(1), math.Inf(-1)
		for _, r := range g.runs {
			for _, n := range r.Errors {
				errs += n
			}
			lo, hi = math.Min(lo, r.RequestsPerS), math.Max(hi, r.RequestsPerS)
		}
		m := g.median(rps)
		fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t(%.0f-%.0f)\t%.2f\t%.2f\t%.2f\t%d\t%s\t%s\t\n", g.scenario, g.label, len(g.runs), m, lo, hi,
			g.median(func(r Summary) float64 { return r.P50ms }), g.median(func(r Summary) float64 { return r.P95ms }),
			g.median(func(r Summary) float64 { return r.P99ms }), errs, ratio(m, baseOf[g.scenario]), ratio(m, healthz))
	}
	return w.Flush()
}

// readRuns reads the summaries of a results file, one JSON line each.
func readRuns(path string) ([]Summary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []Summary
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s Summary
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		runs = append(runs, s)
	}
	return runs, sc.Err()
}

// runGroup is the runs of one scenario and label (REPEAT rounds), folded
// into their median, with the spread of throughput shown beside it.
type runGroup struct {
	scenario, label string
	runs            []Summary
}

// groupRuns groups runs by scenario and label, in the order they first
// appear.
func groupRuns(runs []Summary) []*runGroup {
	var groups []*runGroup
	byKey := map[string]*runGroup{}
	for _, r := range runs {
		k := r.Scenario + "\x00" + r.Label
		if byKey[k] == nil {
			byKey[k] = &runGroup{scenario: r.Scenario, label: r.Label}
			groups = append(groups, byKey[k])
		}
		byKey[k].runs = append(byKey[k].runs, r)
	}
	return groups
}

// median is the median of f over the group's runs.
func (g *runGroup) median(f func(Summary) float64) float64 {
	v := make([]float64, len(g.runs))
	for i, r := range g.runs {
		v[i] = f(r)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func rps(r Summary) float64 { return r.RequestsPerS }

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
