package n8nsetup

import "fmt"

// StepKind says what a line of a Report is.
type StepKind int

const (
	// Change is a change made, or in a dry run one that would be.
	Change StepKind = iota
	// NotDone is what setup could not do: it makes setup fail, so nothing
	// is skipped silently.
	NotDone
	// Note is what could not be checked.
	Note
	// Warning is what would break in a setting the guard cannot read (n8n
	// tells no API key whether its SSRF protection is on).
	Warning
)

// Step is one line of a Report.
type Step struct {
	Kind StepKind
	Text string
}

// Report is what setup or check did and found, in order.
type Report struct {
	DryRun bool
	Steps  []Step
	// Silent are the workflows whose failures nobody would hear of (check).
	Silent []Silent
}

// Silent is one workflow whose failure nobody would hear of.
type Silent struct {
	ID, Name, Why string
}

func (r *Report) add(kind StepKind, format string, args ...any) {
	r.Steps = append(r.Steps, Step{kind, fmt.Sprintf(format, args...)})
}

func (r *Report) count(kind StepKind) int {
	n := 0
	for _, s := range r.Steps {
		if s.Kind == kind {
			n++
		}
	}
	return n
}

// Changes counts the changes made (or that would be, in a dry run).
func (r *Report) Changes() int { return r.count(Change) }

// Summary is setup's last line.
func (r *Report) Summary() string {
	switch {
	case r.Changes() == 0 && r.count(NotDone) == 0:
		return "nothing to change: the instance is wired to n8n-guard"
	case r.DryRun:
		return fmt.Sprintf("dry run: %d change(s) not made", r.Changes())
	}
	return fmt.Sprintf("%d change(s) made", r.Changes())
}

// Err fails setup when anything was not done.
func (r *Report) Err() error {
	if n := r.count(NotDone); n > 0 {
		return fmt.Errorf("%d thing(s) not done, see NOT DONE above", n)
	}
	return nil
}
