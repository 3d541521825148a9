// Package n8n speaks n8n's public REST API (/api/v1, X-N8N-API-KEY) for
// the guard: one Client with one base-URL convention, body limit and error
// text; the setup and check rules of `n8n-guard n8n` as library functions;
// retrying a failed execution, which notify asks for through an interface
// of its own.
//
// It never uses the editor's internal /rest routes, which change between
// releases, except the one unauthenticated /rest/settings that tells n8n's
// version.
//
// It is two adapters in one package, not yet split: the runtime client
// (resume calls, execution reads, retries, reconciliation) and the
// workflow rewriter (`n8n-guard n8n setup`, `check`, `audit`, `guard`).
// The runtime half implements the interfaces of the packages it serves
// and so imports them: keystore (reconcile.go, resume.go: resume answers
// and records), notify and rerun (retrier.go: the Rerunner both ask for);
// the rewriter imports workflows (the shipped templates) and rerun
// (guard.go: the gate's reserve). Of the domain's packages only the
// catch-up runner imports it (n8n.ResumeCaller and its outcome).
package n8n
