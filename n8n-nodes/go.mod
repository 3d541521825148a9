module github.com/n8n-guard/n8n-guard/n8n-nodes-not-go

// This file only keeps node_modules (which can hold stray .go files) out of
// the Go module of the repository root: `go test ./...` does not enter here.
