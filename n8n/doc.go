// Package n8n is the guard's runtime adapter for n8n: what a running guard
// says to the n8n it serves. One Client speaks n8n's public REST API
// (/api/v1, X-N8N-API-KEY) with one base-URL convention, body limit, error
// text and no redirects (Go would send the API key along); on it sit the
// execution reads and retries a re-run and Slack's "Retry execution" ask
// for (executions.go, retrier.go), the watch for workflows n8n turned off
// (offwatch.go) and the version read (version.go). Beside it are the calls
// to n8n's webhooks: resuming a parked execution (resume.go, for catchup)
// and asking a key's check (reconcile.go, for reconcile).
//
// It owns the rule that tells a node calling the guard (GuardOperation,
// guardcall.go), which the off-watch and n8nsetup's audit and rewrite
// share, and the name of the gate's reserve node that a re-run reads
// (ReserveNodePrefix).
//
// It implements the interfaces of the packages it serves and so imports
// them: keystore (resume.go, reconcile.go: resume and check answers,
// the record a check is asked about), notify (retrier.go: notify's
// RetryError) and rerun (retrier.go, executions.go: the Rerunner's
// refusals and the gate's name). catchup, reconcile and cmd/n8n-guard
// import it; so does n8nsetup, the workflow rewriter of the CLI, which
// makes its own REST calls through Client.Do.
//
// It must never import n8nsetup or workflows (the shipped templates are
// the rewriter's to install; a test in n8nsetup fails if it links them),
// and never use the editor's internal /rest routes, which change between
// releases, except the one unauthenticated /rest/settings that tells
// n8n's version.
package n8n
