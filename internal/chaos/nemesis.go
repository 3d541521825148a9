//go:build unix

package chaos

import (
	"context"
	"math/rand/v2"
	"syscall"
	"time"
)

// Nemesis is one kind of fault. Do injects it and returns once the faulty
// part was told to come back (a restarted guard is ready); Heal, when set,
// undoes whatever a Do cut short.
type Nemesis struct {
	Name string
	Do   func(ctx context.Context, rng *rand.Rand) error
	Heal func(ctx context.Context) error
}

// GuardNemeses are the faults of guard processes: SIGKILL and restart,
// SIGTERM and restart, and SIGSTOP for longer than a lease then SIGCONT
// (the fencing case: the stopped guard's callers' leases run out while it
// holds their calls).
func GuardNemeses(guards []*Guard, lease time.Duration) []Nemesis {
	pick := func(rng *rand.Rand) *Guard { return guards[rng.IntN(len(guards))] }
	restart := func(sig syscall.Signal) func(context.Context, *rand.Rand) error {
		return func(ctx context.Context, rng *rand.Rand) error {
			g := pick(rng)
			if err := g.Signal(sig); err != nil {
				return err
			}
			return g.Start(ctx)
		}
	}
	return []Nemesis{
		{Name: "SIGKILL", Do: restart(syscall.SIGKILL)},
		{Name: "SIGTERM", Do: restart(syscall.SIGTERM)},
		{Name: "SIGSTOP", Do: func(ctx context.Context, rng *rand.Rand) error {
			g := pick(rng)
			if err := g.Signal(syscall.SIGSTOP); err != nil {
				return err
			}
			// The fault's duration: a lease and a half.
			select {
			case <-ctx.Done():
			case <-time.After(lease + lease/2):
			}
			return g.Heal(ctx)
		}},
	}
}
