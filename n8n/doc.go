// Package n8n speaks n8n's public REST API (/api/v1, X-N8N-API-KEY) for
// the guard: one Client with one base-URL convention, body limit and error
// text; the setup and check rules of `n8n-guard n8n` as library functions;
// retrying a failed execution, which notify asks for through an interface
// of its own.
//
// It never uses the editor's internal /rest routes, which change between
// releases, except the one unauthenticated /rest/settings that tells n8n's
// version. It imports no guard domain package: notify and cmd reach it,
// not the other way round.
package n8n
