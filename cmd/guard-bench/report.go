package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"
)

// report reads the JSON lines of runs (guard-bench --json) and prints one
// table: per scenario, each label's throughput and latency, and its ratio
// to the base label and to the no-op route (/healthz) of the same file.
func report(args []string) error {
	fs := flag.NewFlagSet("guard-bench report", flag.ContinueOnError)
	base := fs.String("base", "bbolt", "label the ratios are taken against")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: guard-bench report [--base LABEL] results.jsonl")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	var runs []Summary
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var s Summary
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return fmt.Errorf("%s: %w", fs.Arg(0), err)
		}
		runs = append(runs, s)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	var healthz float64
	baseOf := map[string]float64{}
	for _, r := range runs {
		if r.Scenario == "healthz" && healthz == 0 {
			healthz = r.RequestsPerS
		}
		if r.Label == *base {
			baseOf[r.Scenario] = r.RequestsPerS
		}
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "scenario\tlabel\treq/s\tp50 ms\tp95 ms\tp99 ms\terrors\tvs %s\tvs healthz\t\n", *base)
	for _, r := range runs {
		errs := 0
		for _, n := range r.Errors {
			errs += n
		}
		fmt.Fprintf(w, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t%s\t%s\t\n", r.Scenario, r.Label, r.RequestsPerS,
			r.P50ms, r.P95ms, r.P99ms, errs, ratio(r.RequestsPerS, baseOf[r.Scenario]), ratio(r.RequestsPerS, healthz))
	}
	return w.Flush()
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}
