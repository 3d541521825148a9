package api

import (
	"context"
	"strings"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/api/openid"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
)

// ConsoleConfig is the console's sign-in beyond the API tokens.
type ConsoleConfig struct {
	// OpenID signs named people in (nil: only the shared token sign-in);
	// People gives them their roles, ProviderName labels the button.
	OpenID       *openid.Provider
	People       access.People
	ProviderName string
	// NoTokenSignIn turns the shared token sign-in off (OpenID needed).
	NoTokenSignIn bool
	// SessionKey seals the session cookies (console.SessionKeySize
	// bytes); nil: sessions end when the process does.
	SessionKey []byte
	// N8nURL and SlackWorkspace are where the console's links to n8n
	// and Slack point; Hint explains a notification's last failure
	// (console.Config).
	N8nURL, SlackWorkspace string
	Hint                   func(lastFailure string) string
	// WorkflowName asks n8n's API a workflow's name (nil: ids only).
	WorkflowName func(ctx context.Context, id string) (string, error)
	// SignOutFile keeps the console's sign-outs across a restart ("": in
	// memory only).
	SignOutFile string
	// SignOuts keeps the sign-outs where every replica sees them (the
	// PostgreSQL store); nil: SignOutFile, this process only.
	SignOuts console.SignOuts
}

// mountConsole serves the operator console under /ui (api/console). Its
// pages sign in with the same tokens as /v1 and share the error table.
func (s *Server) mountConsole() error {
	var notes console.Notifications
	if s.notes != nil {
		notes = s.notes
	}
	cc := s.consoleCfg
	cfg := console.Config{
		Store:         s.store,
		Notifications: notes,
		Resender:      s.slack,
		SignIn:        s.consolePrincipal,
		People:        cc.People,
		ProviderName:  cc.ProviderName,
		SessionKey:    cc.SessionKey,
		SignOutFile:   cc.SignOutFile,
		SignOuts:      cc.SignOuts,
		Logger:        s.log.With("part", "console"),
		// Who a client is, and its sign-ins, as for /v1 (fair.go).
		ClientAddr:      s.fair.clientAddr,
		SignInPerMinute: s.signInPerMinute,
		Policies:        s.policies,
		OnApproval:      func(d string) { s.metrics.approvals.WithLabelValues(d).Inc() },
	}
	cfg.Parking = s.store
	if s.reruns != nil { // a nil api.Reruns stays a nil interface: no re-run offered
		cfg.Reruns = s.reruns
	}
	if t, ok := s.notes.(console.Thread); ok { // notify.Service with notify/decision
		cfg.Thread = t
	}
	cfg.N8nURL, cfg.SlackWorkspace, cfg.Hint, cfg.WorkflowName = cc.N8nURL, cc.SlackWorkspace, cc.Hint, cc.WorkflowName
	if cc.OpenID != nil {
		cfg.OpenID = cc.OpenID
	}
	if cc.NoTokenSignIn {
		cfg.SignIn = nil
	}
	ui, err := console.New(cfg)
	if err != nil {
		return err
	}
	ui.Mount(s.app)
	return nil
}

// consolePrincipal checks a token typed into the console's sign-in form
// against the same token set as /v1, in constant time. The console lists
// keys, so it needs the list scope (read and admin roles; a reserve token,
// a team's n8n, may not sign in); it may act with the admin scope, within
// the token's namespaces.
func (s *Server) consolePrincipal(token string) (access.Principal, error) {
	p, ok := s.tokens.find("Bearer " + strings.TrimSpace(token))
	if !ok {
		return access.Principal{}, errs.Errorf(problem.Unauthorized, "that token is not valid")
	}
	if !p.Allows(access.ScopeList) {
		s.metrics.refused(p.Name, "scope")
		return access.Principal{}, errs.Errorf(errs.Forbidden,
			"token %s (role %s) may not use the console: sign in with a read or admin token", p.Name, p.Role)
	}
	return p, nil
}
