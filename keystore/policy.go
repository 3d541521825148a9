package keystore

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// LeaseExpiry is what happens to a reservation whose lease ran out.
type LeaseExpiry string

const (
	// ExpireToUnknown: the holder may have acted, so a person must decide.
	ExpireToUnknown LeaseExpiry = "unknown"
	// ExpireReclaim: the target is itself idempotent, so a new attempt may start.
	ExpireReclaim LeaseExpiry = "reclaim"
)

// Defaults of the contract.
const (
	DefaultLease            = 300 * time.Second
	DefaultRetention        = 30 * 24 * time.Hour
	DefaultCooldown         = 300 * time.Second
	DefaultFailureThreshold = 5
	// DefaultUnreachableThreshold is lower: a failure that never reached
	// the destination is stronger evidence, but one key is still no more
	// than one caller's word (breaker.go).
	DefaultUnreachableThreshold = 2
)

// NamespacePolicy is the per-namespace configuration. A zero or negative
// duration and an empty OnLeaseExpiry mean the default (withDefaults).
type NamespacePolicy struct {
	// Lease: how long a reservation holds its key (default DefaultLease,
	// 300 s); a reserve may ask for its own.
	Lease time.Duration
	// Retention: how long a finished record is kept (default
	// DefaultRetention, 30 days).
	Retention time.Duration
	// OnLeaseExpiry: what a lease that ran out becomes (default
	// ExpireToUnknown).
	OnLeaseExpiry LeaseExpiry
	Owner         string
	Runbook       string
	// ParkedLimit: a key parked longer is reported (default
	// DefaultParkedLimit, 3 days).
	ParkedLimit time.Duration
	// Check names the check asked before a person is paged about an
	// unknown key (check.go); "": the destination's, if any.
	Check string

	// destinations are the policies' destinations, for their checks
	// (Namespace fills it in); a pointer keeps NamespacePolicy comparable.
	destinations *map[string]DestinationPolicy
	// Approval: a person approves each new event first (approval.go).
	Approval ApprovalPolicy
	// people is the policies' People, for four eyes (Namespace fills it
	// in); a pointer, as destinations.
	people *People
}

// DestinationPolicy configures one destination's circuit breaker. A zero
// or negative number means the default (withDefaults).
type DestinationPolicy struct {
	// Cooldown: how long an open breaker waits before a probe (default
	// DefaultCooldown, 300 s).
	Cooldown time.Duration
	// FailureThreshold is how many distinct keys must fail to open the
	// breaker (default DefaultFailureThreshold, 5); UnreachableThreshold
	// (at most FailureThreshold; default DefaultUnreachableThreshold, 2)
	// when the failure that reaches it is destination_unreachable.
	FailureThreshold     int
	UnreachableThreshold int
	// Namespaces, when set, are the only namespaces that may use the
	// destination (Admits); empty: every namespace.
	Namespaces []string
	Owner      string
	// CatchUpRate (resumes per second; default DefaultCatchUpRate, 5) and
	// CatchUpConcurrency (resumed executions not yet finished; default
	// DefaultCatchUpConcurrency, 4) bound the catch-up after an outage
	// (catchup.go).
	CatchUpRate        float64
	CatchUpConcurrency int
	// Check names the check of the keys written to this destination whose
	// namespace names none (check.go).
	Check string
}

// Policies holds the configured namespaces and destinations; anything not
// configured gets the defaults.
type Policies struct {
	Namespaces   map[string]NamespacePolicy
	Destinations map[string]DestinationPolicy
	// Resume are the n8n instances resume URLs may point at (resume.go);
	// the zero value: none, parking is refused.
	Resume ResumeTargets
	// People says which identifiers name one person, for four eyes
	// (person.go); the zero value knows nobody.
	People People
}

// Namespace returns the policy of ns with defaults filled in.
func (p Policies) Namespace(ns string) NamespacePolicy {
	np := p.Namespaces[ns]
	if len(p.Destinations) > 0 {
		np.destinations = &p.Destinations
	}
	if p.People.Known() || p.People.Match != (PersonMatch{}) {
		np.people = &p.People
	}
	return np.withDefaults()
}

// withDefaults fills in every default of a namespace: the one place they
// are applied. A zero or negative duration is the default.
func (np NamespacePolicy) withDefaults() NamespacePolicy {
	np.Lease = cmp.Or(max(np.Lease, 0), DefaultLease)
	np.Retention = cmp.Or(max(np.Retention, 0), DefaultRetention)
	np.ParkedLimit = cmp.Or(max(np.ParkedLimit, 0), DefaultParkedLimit)
	np.OnLeaseExpiry = cmp.Or(np.OnLeaseExpiry, ExpireToUnknown)
	// Records keep milliseconds; so must every duration added to them.
	np.Lease, np.Retention = np.Lease.Truncate(time.Millisecond), np.Retention.Truncate(time.Millisecond)
	return np
}

// destination is the configured policy of dest as it is (no defaults):
// what the key's decisions need to know of its destination.
func (np NamespacePolicy) destination(dest string) DestinationPolicy {
	if np.destinations == nil || dest == "" {
		return DestinationPolicy{}
	}
	return (*np.destinations)[dest]
}

// Destination returns the policy of dest with defaults filled in.
func (p Policies) Destination(dest string) DestinationPolicy {
	return p.Destinations[dest].withDefaults()
}

// withDefaults fills in every default of a destination: the one place
// they are applied. A zero or negative number is the default.
func (dp DestinationPolicy) withDefaults() DestinationPolicy {
	dp.Cooldown = cmp.Or(max(dp.Cooldown, 0), DefaultCooldown)
	dp.FailureThreshold = cmp.Or(max(dp.FailureThreshold, 0), DefaultFailureThreshold)
	dp.UnreachableThreshold = cmp.Or(max(dp.UnreachableThreshold, 0), DefaultUnreachableThreshold)
	dp.UnreachableThreshold = min(dp.UnreachableThreshold, dp.FailureThreshold)
	dp.CatchUpRate = cmp.Or(max(dp.CatchUpRate, 0), DefaultCatchUpRate)
	dp.CatchUpConcurrency = cmp.Or(max(dp.CatchUpConcurrency, 0), DefaultCatchUpConcurrency)
	dp.Cooldown = dp.Cooldown.Truncate(time.Millisecond)
	return dp
}

// BreakerPolicy is the policy of br's destination (zero when the key has
// no destination).
func (p Policies) BreakerPolicy(br *Breaker) DestinationPolicy {
	if br == nil {
		return DestinationPolicy{}
	}
	return p.Destination(br.Destination)
}

// WithConfigured completes the breakers a store holds with every
// configured destination it has none for (closed until something happens
// to it), sorted by destination.
func (p Policies) WithConfigured(held []Breaker) []Breaker {
	seen := make(map[string]bool, len(held))
	for _, b := range held {
		seen[b.Destination] = true
	}
	for d := range p.Destinations {
		if !seen[d] {
			held = append(held, *NewBreaker(d))
		}
	}
	slices.SortFunc(held, func(a, b Breaker) int { return strings.Compare(a.Destination, b.Destination) })
	return held
}
