// Package console is the operator console served under /ui: server-rendered
// pages (html/template, assets embedded with go:embed, no script) on which
// the person on call sees what the guard holds — counts, keys waiting for a
// decision, open breakers, parked events and maintenance windows, stuck
// notifications, the last day's activity — searches keys, and resolves
// them, resets breakers, sets and ends maintenance windows and re-sends
// dead notifications.
//
// A person signs in as themself through an identity provider (OpenID
// Connect, api/openid; their role from access.People), or with a shared
// API token; either way the session is sealed in a cookie (HttpOnly,
// SameSite=Strict, Secure over TLS) with the key from the data folder, so
// it survives a restart; a token never appears in a URL. Every action is
// a POST that carries the session's CSRF token. What a session may do
// comes from its role (access.Principal.CanAct, CanOperate), and every
// decision names who made it (session.by).
//
// Like api/, this package only translates: every decision about a key is
// keystore's (Resolve), every rule about notifications is notify's. What it
// must never do: render anything from the store other than as text (the
// templates are html/template, the CSP forbids inline script), put a token
// in a URL, or change anything on a GET.
package console
