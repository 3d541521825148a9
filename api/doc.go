// Package api is the HTTP face of n8n-guard: a fiber app that translates
// requests of the v1 contract (docs/api.md, docs/openapi.yaml) into calls of
// keystore.Store and the notification outbox, and their answers back into
// JSON.
//
// Handlers only decode, validate and encode. Every rule about keys lives in
// keystore: the validator's custom tags call keystore's own checks, and the
// store checks again. Every error becomes an RFC 9457 problem in exactly one
// function, writeError.
//
// What this package must never do: decide a key's state, answer with a
// top-level "error" key (n8n's Retry On Fail would repeat the write), or
// put a server internal into a 5xx answer.
package api
