// Package e2e proves the shipped n8n workflows against a real n8n, the real
// n8n-guard binary and fakes for the systems that cannot run here (a CRM, a
// mail API, Slack). It counts side effects exactly: a test passes only if
// every event reached its target the number of times it should.
//
// The suite is behind the e2e build tag so that plain `go test ./...` stays
// fast; run it with
//
//	go test -tags e2e -count=1 -timeout 30m ./e2e/...
//
// The first run installs the pinned n8n (about 4 minutes, 1.4 GB) into the
// user cache directory and reuses it afterwards; N8N_GUARD_N8N_DIR overrides
// the place. Logs of n8n, the guard and the fakes stay in e2e/.work/.
package e2e
