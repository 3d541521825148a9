package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"strings"

	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// mountConsole serves the operator console under /ui (api/console). Its
// pages sign in with the same tokens as /v1 and share the error table.
func (s *Server) mountConsole() error {
	var notes console.Notifications
	if s.notes != nil {
		notes = s.notes
	}
	ui, err := console.New(console.Config{
		Store:         s.store,
		Notifications: notes,
		SignIn:        s.consolePrincipal,
		StatusOf:      statusOf,
		Logger:        s.log.With("part", "console"),
	})
	if err != nil {
		return err
	}
	ui.Mount(s.app)
	return nil
}

// consolePrincipal checks a token typed into the console's sign-in form,
// in constant time like authorize. Every configured token may act: there
// are no scoped tokens yet. With them, this is where a token's role
// becomes CanAct (read: false).
func (s *Server) consolePrincipal(token string) (console.Principal, bool) {
	token = strings.TrimSpace(token)
	if token == "" {
		return console.Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	match := 0
	for i := range s.tokens {
		match |= subtle.ConstantTimeCompare(sum[:], s.tokens[i][:])
	}
	return console.Principal{Name: "api token", CanAct: true}, match == 1
}

// StatusOf is the HTTP status of an error code: the one table, for pages
// that render errors themselves (the console's tests mount it alone).
func StatusOf(code keystore.Code) int { return statusOf(code) }
