// Package notify turns failures into Slack messages for a named person: the
// items of n8n's Error Trigger (POST /v1/n8n/error) and the events the
// keystore writes when a key goes unknown or a destination's breaker opens
// or closes.
//
// Every notification is first stored in a durable outbox (bbolt buckets
// named "notify/…" in the keystore's file) and only then acknowledged; a
// background worker delivers it to Slack with backoff, honours 429
// Retry-After, stops at once when Slack is unreachable (circuit breaker) and
// folds storms of the same failure into one message whose count it updates.
//
// What this package must never do: send or store request bodies, headers,
// node parameters, stack traces or e-mail addresses taken from a payload;
// mark a notification delivered that Slack did not accept; call Slack while
// a bbolt transaction is open.
package notify
