// Package api is the HTTP face of n8n-guard: a fiber app that translates
// requests of the v1 contract (docs/api.md, docs/openapi.yaml) into calls of
// keystore.Store and the notification outbox, and their answers back into
// JSON.
//
// Each route is one line of the table in routes.go: method, path, the
// scope it needs (or open) and its handler; the token check, the small
// body limit of a request without a valid token and the namespace check
// follow from that line. Handlers only decode and encode: every input rule
// about keys is a tag on keystore's request types, applied once by the
// store. Every error becomes an RFC 9457 problem in exactly one function,
// writeError, through the one status table of api/problem.
//
// What this package must never do: decide a key's state, answer with a
// top-level "error" key (n8n's Retry On Fail would repeat the write), or
// put a server internal into a 5xx answer.
package api
