package n8nsetup

import (
	"fmt"

	"github.com/n8n-guard/n8n-guard/n8n"
)

// Describe is the line the commands print about the n8n at base: the
// version, where it was read, and, on a line of its own, what is proven
// on it (caveat).
func Describe(v n8n.Version, base string) string {
	s := fmt.Sprintf("n8n %s at %s (%s)", v, base, v.From)
	if c := caveat(v); c != "" {
		s += "\n  note: " + c
	}
	return s
}

// caveat says what is not proven on v: 3.x is checked against n8n's
// documented changes, not run; an inferred major is only inferred. ""
// for a version the end-to-end suite runs.
func caveat(v n8n.Version) string {
	switch {
	case v.From == n8n.FromInferred:
		return fmt.Sprintf("checked as n8n %d.x, whose public API n8n 3.x keeps (3.x is checked against n8n's documented 3.0 changes, docs/n8n.md, not run here); say which n8n it is with --n8n-version (or N8N_VERSION)", v.Major)
	case v.Major > provenMajor:
		return fmt.Sprintf("n8n %d.x is checked against n8n's documented %d.0 changes (docs/n8n.md), not run here: the end-to-end suite runs n8n %s and %s", v.Major, v.Major, provenNewest, provenOldest)
	}
	return ""
}

// The n8n the commands are proven against (the e2e suite runs these), and
// the newest major they accept: 3.x on n8n's documented 3.0 changes
// (Docker-only, no npm package to run here).
const (
	oldestMajor, oldestMinor = 1, 113
	provenMajor              = 2
	newestMajor              = 3
	provenNewest             = "2.41.1"
	provenOldest             = "1.113.3"
)

// supported refuses versions the commands were never checked against: a
// 1.x before 1.113 and anything after 3.x, whose API may publish
// differently.
func supported(v n8n.Version) error {
	old := v.Major < oldestMajor || (v.Major == oldestMajor && v.Minor < oldestMinor)
	if old || v.Major > newestMajor {
		return fmt.Errorf("n8n %s (%s) is not supported: n8n-guard n8n works with n8n %d.%d and later 1.x, 2.x (proven on %s and %s) and 3.x (checked against n8n's documented 3.0 changes)",
			v, v.From, oldestMajor, oldestMinor, provenOldest, provenNewest)
	}
	return nil
}

// withGiven is v after the operator said which n8n it is: the given
// version where n8n told none, an error where n8n told another major.
func withGiven(v n8n.Version, given string) (n8n.Version, error) {
	g, err := n8n.ParseVersion(given)
	if err != nil {
		return v, fmt.Errorf("--n8n-version: %w", err)
	}
	g.From = n8n.FromGiven
	switch {
	case v.Exact && g.Major != v.Major:
		return v, fmt.Errorf("--n8n-version %s: n8n says it is %s (%s)", given, v, v.From)
	case v.Exact:
		return v, nil
	case g.Major < v.Major:
		return v, fmt.Errorf("--n8n-version %s: n8n answers as n8n %s does (its login-free settings carry no version)", given, v)
	}
	return g, nil
}
