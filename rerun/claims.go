package rerun

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// claims are the re-run claims of one execution's keys: n8n is asked
// once for all of them, so one calls.Keeper keeps them together (each
// extended whenever the first of them has less than half a claim left)
// and hands them back together. keys and at are written by the call's
// goroutine (claim) before keep, then by the keeper's goroutine (extend)
// until it stops, then by the call's again (release, after Stop).
type claims struct {
	r    *Runner
	keys []*keystore.Record
	at   []time.Time // each key's claim's time, as the store last gave it; zero: no longer this guard's
}

// claim claims rec's re-run for this guard; false: another guard has it,
// or the key moved on.
func (c *claims) claim(ctx context.Context, rec *keystore.Record) (bool, error) {
	at, ok, err := c.r.store.ClaimRerunHeld(ctx, rec.Namespace, rec.Key, c.r.opts.Name, c.r.opts.Claim, c.r.opts.Started)
	if err != nil || !ok {
		return false, err
	}
	c.keys = append(c.keys, rec)
	c.at = append(c.at, at)
	return true, nil
}

// keep starts keeping the claims until the Keeper's Stop or HandBack.
func (c *claims) keep(ctx context.Context, log *slog.Logger) *calls.Keeper {
	length := c.r.opts.Claim
	return calls.Keep(ctx, calls.Claim{Until: c.until(), Length: length, Every: min(length/4, time.Second), Clock: c.r.opts.Clock,
		Log: log, What: "re-run: the claims of an execution's keys", Extend: c.extend, Release: c.release})
}

// until is when the first claim still held lapses (zero: none is held).
func (c *claims) until() time.Time {
	var first time.Time
	for _, at := range c.at {
		if !at.IsZero() && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if first.IsZero() {
		return first
	}
	return first.Add(c.r.opts.Claim)
}

// extend extends every claim still held (calls.Claim.Extend); an error
// leaves the claims it could not extend as they were, to be tried again.
func (c *claims) extend(ctx context.Context, _ time.Time) (time.Time, bool, error) {
	var first error
	for i, rec := range c.keys {
		if c.at[i].IsZero() {
			continue
		}
		at, ok, err := c.r.store.ExtendRerunClaim(ctx, rec.Namespace, rec.Key, c.r.opts.Name, c.at[i])
		switch {
		case err != nil:
			first = cmp.Or(first, err)
		case ok:
			c.at[i] = at
		default:
			c.at[i] = time.Time{} // answered, or no longer this guard's
		}
	}
	until := c.until()
	return until, !until.IsZero(), first
}

// release hands back every claim still held (calls.Claim.Release): n8n
// was not asked.
func (c *claims) release(ctx context.Context, _ time.Time) (bool, error) {
	all := true
	var first error
	for i, rec := range c.keys {
		if c.at[i].IsZero() {
			continue
		}
		ok, err := c.r.store.ReleaseRerunClaim(ctx, rec.Namespace, rec.Key, c.r.opts.Name, c.at[i])
		all = all && ok && err == nil
		first = cmp.Or(first, err)
	}
	return all, first
}
