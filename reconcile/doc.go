// Package reconcile asks a key's check before a person is paged about it
// (keystore/check.go): for each unknown key whose page waits for its
// check, it claims the call in the store (so of several guards on one
// PostgreSQL exactly one calls it), calls the check's n8n webhook a few
// times with backoff, and records the answer, which completes the key
// (found), fails it retryable or hands its waiting execution to the
// catch-up (absent), or pages the person as before (anything else).
//
// The decisions are keystore's; this package only runs them. It must
// never call a check without holding the key's claim, never let the claim
// lapse while its call is in flight (calls.Keeper extends it), never
// record an answer when it was stopped mid-call (the claim is handed back
// and the call is made again), and never decide a key itself: an answer
// about a key a person decided meanwhile is dropped by the store. Its
// loop and claim keeper are the calls package's.
package reconcile
