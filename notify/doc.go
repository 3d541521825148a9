// Package notify turns failures into Slack messages for a named person: the
// items of n8n's Error Trigger (POST /v1/n8n/error) and the events the
// keystore writes when a key goes unknown, a parked execution is lost or
// waits too long, or a destination's breaker opens or closes. An outage of
// a destination is one message, edited in place as events park, the
// breaker closes and the parked events are caught up (outage.go).
//
// Every notification is first stored in a durable Outbox (notify/bolt:
// buckets in the keystore's bbolt file; notify/postgres: shared by
// replicas) and only then acknowledged; a background worker delivers it
// through the Slack interface (the slack package) with backoff, honours 429
// Retry-After, stops at once when Slack is unreachable (circuit breaker) and
// folds storms of the same failure into one message whose count it updates.
// A notification's life cycle is the pure functions of transitions.go.
// The decisions people take on the messages (their Slack buttons, the
// console) are carried out by notify/decision, which records them through
// the Service (decisions.go); this package never imports it.
//
// What this package must never do: import a database driver, net/http or
// an SDK (those are the stores' and the adapters'); send or store request
// bodies, headers, node parameters, stack traces or e-mail addresses taken
// from a payload; mark a notification delivered that Slack did not accept;
// call Slack while an outbox transaction is open.
package notify
