// Package console is the operator console served under /ui: server-rendered
// pages (html/template, assets embedded with go:embed, no script) on which
// the person on call sees what the guard holds — counts, keys waiting for a
// decision, open breakers, parked events and maintenance windows, stuck
// notifications, the last day's activity — searches keys, and resolves
// them, resets breakers, sets and ends maintenance windows and re-sends
// dead notifications.
//
// A person signs in with an API token, exchanged for a session cookie
// (HttpOnly, SameSite=Strict, Secure over TLS); the token never appears in
// a URL. Every action is a POST that carries the session's CSRF token. What
// a session may do comes from the token's role (access.Principal.CanAct).
//
// Like api/, this package only translates: every decision about a key is
// keystore's (Resolve), every rule about notifications is notify's. What it
// must never do: render anything from the store other than as text (the
// templates are html/template, the CSP forbids inline script), put a token
// in a URL, or change anything on a GET.
package console
