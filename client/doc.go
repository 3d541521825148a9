// Package client is the guard's own Go client of its HTTP API v1: what the
// CLI's operator commands, the bench tool and the end-to-end tests call
// the server with. It speaks the wire contract (docs/api.md) and decodes
// into the server's own answer types (api/wire); it holds no rule of its
// own beyond reading an answer, and never links the server's HTTP
// framework (deps_test.go).
package client
