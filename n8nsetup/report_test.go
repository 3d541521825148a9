package n8nsetup

import (
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	for _, c := range []struct {
		name    string
		dryRun  bool
		steps   []StepKind
		summary string
		err     string
	}{
		{"nothing to do", false, nil, "nothing to change", ""},
		{"a note is not a change", false, []StepKind{Note}, "nothing to change", ""},
		{"changes made", false, []StepKind{Note, Change, Change}, "2 change(s) made", ""},
		{"a dry run makes none", true, []StepKind{Change}, "dry run: 1 change(s) not made", ""},
		{"what was not done fails setup", false, []StepKind{Change, NotDone}, "1 change(s) made", "1 thing(s) not done"},
		{"not done alone is not 'nothing to change'", false, []StepKind{NotDone}, "0 change(s) made", "1 thing(s) not done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Report{DryRun: c.dryRun}
			for _, k := range c.steps {
				r.add(k, "step")
			}
			if got := r.Summary(); !strings.Contains(got, c.summary) {
				t.Errorf("Summary() = %q, want %q", got, c.summary)
			}
			err := r.Err()
			if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Errorf("Err() = %v, want %q", err, c.err)
			}
		})
	}
}
