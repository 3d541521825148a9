// Package calls is the core of every worker that calls n8n for a key
// (catch-up resume, approval resume, check, re-run): one loop woken by
// the store's commits, with the ticker only as the fallback for another
// guard's commits, a bounded number of calls in flight and never two for
// one key (loop.go), and one keeper of a key's claim while its call is in
// flight, which hands back a claim whose call was not made when its
// guard stops (claim.go). The backoff of the calls is internal/callback's.
//
// It decides nothing about a key: the claims, the answers and what they
// mean are keystore's, and each worker says what a call is. It must never
// start a call for a key whose call of this guard is still in flight, and
// never let a claim it keeps lapse while its call runs.
package calls
