package console

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Prefix is where the console is served.
const Prefix = "/ui"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Store is the keystore the console reads and changes.
type Store = keystore.Store

// Notifications is the part of the notification outbox the console shows.
type Notifications interface {
	List(ctx context.Context, q notify.ListQuery) (notify.Page, error)
}

// Resender re-sends a dead notification (notify.Service.Resend), passed
// as Config.Resender.
type Resender interface {
	Resend(ctx context.Context, id string) (notify.Notification, error)
}

// Config is what the console needs; api fills it.
type Config struct {
	Store         Store
	Notifications Notifications // nil: notifications are not configured
	// Resender re-sends dead notifications (nil: the page shows them and
	// why they failed, without a re-send button).
	Resender Resender
	// SignIn checks an API token and says whose it is; an error (with the
	// code unauthorized or forbidden) for a token that may not sign in. It
	// must compare in constant time. nil: no shared token sign-in (then
	// OpenID is required).
	SignIn func(token string) (access.Principal, error)
	// OpenID signs named people in through an identity provider (nil: no
	// named sign-in); People gives them their roles, ProviderName labels
	// the button ("Google", "Okta"; default "your identity provider").
	OpenID       PersonSignIn
	People       access.People
	ProviderName string
	// SessionKey seals the session cookies (SessionKeySize bytes, kept in
	// the data folder so sessions survive a restart); nil: a random key,
	// and a restart signs everybody out.
	SessionKey []byte
	Logger     *slog.Logger     // nil: discarded
	Clock      func() time.Time // nil: time.Now
	SessionTTL time.Duration    // default 12h
	// SignOutFile keeps the sign-outs so that they hold across a restart
	// (the data folder's console-signouts, next to the session key); ""
	// keeps them in memory only.
	SignOutFile string
	// SignOuts keeps the sign-outs where every replica sees them (the
	// PostgreSQL store); nil: this process only (and SignOutFile).
	SignOuts SignOuts
	// MaxSessions bounds the sign-outs remembered at once (default
	// 10,000); the one closest to its end is forgotten to make room, with
	// a log line.
	MaxSessions int
	// ClientAddr says who sent a request (api: the peer, or the client a
	// trusted proxy names); nil: the peer address.
	ClientAddr func(*fiber.Ctx) netip.Addr
	// SignInPerMinute bounds one client's sign-in attempts a minute
	// (default 10; negative: no limit).
	SignInPerMinute int
	// Parking is the store's side of parked events and maintenance
	// windows (nil: the store parks nothing; the pages show no counts and
	// no window forms).
	Parking Parking
	// Policies give each namespace's parked_limit (when a parked key is
	// overdue) and each destination's catch-up pace.
	Policies keystore.Policies
	// OnApproval counts an approval decided in the console (nil: none).
	OnApproval func(decision string)
	// Thread links keys to their owner, runbook and Slack message, lists
	// failed executions and plans re-sends (thread.go; nil: not shown).
	Thread Thread
	// N8nURL is n8n's address people open (links to executions and
	// workflows; "": taken from a parked key's resume URL, else none).
	N8nURL string
	// SlackWorkspace is the Slack workspace ("acme", acme.slack.com) the
	// links to messages and people open ("": Slack's redirect to the
	// channel).
	SlackWorkspace string
	// Hint says what an operator does about a notification's last
	// failure (slack.HintOf; nil: no hint).
	Hint func(lastFailure string) string
	// WorkflowName asks n8n a workflow's name (n8n's API; nil: the key
	// page names the workflow by its id).
	WorkflowName func(ctx context.Context, id string) (string, error)
	// Reruns starts the re-runs of n8n executions a person allows
	// (rerun.Runner; nil: n8n's API is not configured, and the console
	// neither offers nor accepts a re-run).
	Reruns interface{ Kick() }
	// Refresh is how often the overview and the lists fetch themselves
	// again in the browser (default 15 s, at least 1 s); negative: never
	// (a browser test holds on to the elements it reads, which a refresh
	// replaces).
	Refresh time.Duration
}

// withDefaults fills in every default of Config, as its comments say: the
// one place they are applied. (A missing SessionKey is made in New: it is
// a secret, not a default.)
func (cfg Config) withDefaults() Config {
	cfg.ProviderName = cmp.Or(cfg.ProviderName, "your identity provider")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	// A zero or negative value is the default.
	cfg.SessionTTL = cmp.Or(max(cfg.SessionTTL, 0), 12*time.Hour)
	cfg.MaxSessions = cmp.Or(max(cfg.MaxSessions, 0), 10000)
	// Zero is the default; negative: no limit, never.
	cfg.SignInPerMinute = cmp.Or(cfg.SignInPerMinute, DefaultSignInPerMinute)
	cfg.Refresh = cmp.Or(cfg.Refresh, 15*time.Second)
	return cfg
}

// Console serves the pages.
type Console struct {
	store    Store
	notes    Notifications
	resender Resender
	parking  Parking
	policies keystore.Policies
	signIn   func(string) (access.Principal, error)
	openID   PersonSignIn
	people   access.People
	provider string
	seal     *sealer
	log      *slog.Logger
	now      func() time.Time
	sessions *sessions
	signIns  *signInLimit
	pages    map[string]*template.Template
	static   fs.FS
	// onApproval counts approvals decided here (approvals.go).
	onApproval func(decision string)
	// thread.go
	thread         Thread
	n8nURL         string
	slackWorkspace string
	hint           func(string) string
	workflowNames  *workflowNames
	reruns         interface{ Kick() } // nil: no re-runs (rerun.go)
}

// New checks cfg and parses the templates.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil || (cfg.SignIn == nil && cfg.OpenID == nil) {
		return nil, errors.New("console: a store and a sign-in (shared token or OpenID) are required")
	}
	cfg = cfg.withDefaults()
	if cfg.SessionKey == nil {
		cfg.SessionKey = make([]byte, SessionKeySize)
		if _, err := rand.Read(cfg.SessionKey); err != nil {
			return nil, err
		}
	}
	seal, err := newSealer(cfg.SessionKey)
	if err != nil {
		return nil, err
	}
	ui := &Console{
		store:          cfg.Store,
		notes:          cfg.Notifications,
		resender:       cfg.Resender,
		parking:        cfg.Parking,
		policies:       cfg.Policies,
		signIn:         cfg.SignIn,
		openID:         cfg.OpenID,
		people:         cfg.People,
		provider:       cfg.ProviderName,
		seal:           seal,
		log:            cfg.Logger,
		now:            cfg.Clock,
		sessions:       newSessions(seal, cfg.SessionTTL, cfg.MaxSessions, cfg.Logger),
		signIns:        newSignInLimit(cfg.SignInPerMinute, cfg.ClientAddr, cfg.Logger),
		onApproval:     cfg.OnApproval,
		thread:         cfg.Thread,
		n8nURL:         strings.TrimRight(cfg.N8nURL, "/"),
		slackWorkspace: SlackWorkspaceURL(cfg.SlackWorkspace),
		hint:           cfg.Hint,
		workflowNames:  newWorkflowNames(cfg.WorkflowName),
		reruns:         cfg.Reruns,
	}
	if ui.hint == nil {
		ui.hint = func(string) string { return "" }
	}
	ui.sessions.shared = cfg.SignOuts
	if cfg.SignOutFile != "" {
		if err := ui.sessions.keepSignOuts(cfg.SignOutFile, cfg.Clock()); err != nil {
			return nil, err
		}
	}
	funcs := templateFuncs(ui.now, refreshAttr(cfg.Refresh))
	funcs["keyOwner"], funcs["destinationOwner"], funcs["approvers"] = ui.keyOwner, ui.destinationOwner, ui.approvers
	if ui.pages, err = parsePages(funcs); err != nil {
		return nil, err
	}
	if ui.static, err = fs.Sub(staticFiles, "static"); err != nil {
		return nil, err
	}
	return ui, nil
}

// Mount registers the console's routes on app, under Prefix.
func (ui *Console) Mount(app *fiber.App) {
	get, post := fiber.MethodGet, fiber.MethodPost
	ui.route(app, get, "", anyone, ui.overview)
	ui.route(app, get, "/signin", signedOut, ui.signInPage)
	ui.route(app, post, "/signin", signedOut, ui.signInSubmit)
	ui.route(app, get, "/signin/oidc", signedOut, ui.oidcStart)
	ui.route(app, get, "/signin/oidc/callback", signedOut, ui.oidcCallback)
	ui.route(app, post, "/signout", anyone, ui.signOut)
	ui.route(app, get, "/audit", anyone, ui.audit)
	ui.route(app, get, "/keys", anyone, ui.search)
	ui.route(app, get, "/key", anyone, ui.keyPage)
	ui.route(app, post, "/key/resolve", actor, ui.resolve)
	ui.route(app, get, "/bulk", anyone, ui.bulkPage) // bulk.go
	ui.route(app, post, "/bulk", gateOf(access.BulkScope), ui.bulkSubmit)
	ui.route(app, get, "/breakers", anyone, ui.breakers)
	ui.route(app, post, "/breakers/reset", operator, ui.resetBreaker)
	ui.route(app, get, "/destination", anyone, ui.destinationPage) // parking.go
	ui.route(app, post, "/destination/hold", operator, ui.hold)
	ui.route(app, post, "/destination/end-hold", operator, ui.endHold)
	ui.route(app, get, "/parked", anyone, ui.parked)
	ui.route(app, get, "/notifications", anyone, ui.notifications)
	ui.route(app, post, "/notifications/resend", operator, ui.resend)
	ui.route(app, get, "/approvals", anyone, ui.approvals) // approvals.go
	ui.route(app, post, "/approvals/decide", actor, ui.decideApproval)
	ui.route(app, get, "/failures", anyone, ui.failures) // failures.go
	ui.route(app, post, "/failures/ack", actor, ui.decideFailure)
	app.Get(Prefix+"/static/:file", ui.asset)
}

// gate says who may use a route.
type gate int

const (
	signedOut gate = iota // the sign-in page itself
	anyone                // any signed-in session
	actor                 // a session whose role may decide on keys
	operator              // a session whose role may operate (admin)
)

// gateOf is the gate of an action that needs scope, for a rule the API's
// route table states as well (access.BulkScope).
func gateOf(scope access.Scope) gate {
	switch scope {
	case access.ScopeDecide:
		return actor
	case access.ScopeAdmin:
		return operator
	}
	panic("console: no gate for scope " + string(scope))
}

// handler is a page or action; sess is nil only on signedOut routes.
type handler func(c *fiber.Ctx, sess *session) error

// route wraps every page the same way: security headers, panic recovery,
// the session check, CSRF on every POST, the role check on actions, and
// errors rendered as a page.
func (ui *Console) route(app *fiber.App, method, path string, who gate, h handler) {
	app.Add(method, Prefix+path, func(c *fiber.Ctx) (err error) {
		defer func() {
			if p := recover(); p != nil {
				ui.log.Error("panic in console page", "path", path, "panic", p, "stack", string(debug.Stack()))
				err = ui.renderError(c, nil, fmt.Errorf("panic: %v", p))
			}
		}()
		securityHeaders(c)
		sess := ui.session(c)
		if err := ui.admit(c, method, who, sess); err != nil {
			if sess == nil && errs.CodeOf(err) == problem.Unauthorized {
				return ui.signInAgain(c, method)
			}
			return ui.renderError(c, sess, err)
		}
		if err := h(c, sess); err != nil {
			return ui.renderError(c, sess, err)
		}
		return nil
	})
}

// admit decides whether the request may reach its handler.
func (ui *Console) admit(c *fiber.Ctx, method string, who gate, sess *session) error {
	if method == fiber.MethodPost && !sameOrigin(c) {
		return errs.Errorf(errs.Forbidden, "the form was sent from another site; open the console and try again")
	}
	if who == signedOut {
		return nil
	}
	if sess == nil {
		return errs.Errorf(problem.Unauthorized, "sign in first (your session may have ended)")
	}
	if method == fiber.MethodPost {
		sent := formBody(c, "csrf")
		if sent == "" || subtle.ConstantTimeCompare([]byte(sent), []byte(sess.csrf)) != 1 {
			return errs.Errorf(errs.Forbidden, "the form is missing its CSRF token or it is stale; reload the page and try again")
		}
	}
	if who == actor && !sess.who.CanAct() {
		return errs.Errorf(errs.Forbidden, "%s (role %s) may only read; deciding needs the role decide or admin", sess.who.Name, sess.who.Role)
	}
	if who == operator && !sess.who.CanOperate() {
		return errs.Errorf(errs.Forbidden, "%s (role %s) may not reset breakers or re-send notifications; that needs the role admin", sess.who.Name, sess.who.Role)
	}
	return nil
}

// sameOrigin refuses a POST that another site made the browser send: by
// Sec-Fetch-Site where the browser sends it, else by Origin. SameSite=Strict
// keeps the cookie off cross-site requests anyway, and the CSRF token is
// checked as well.
func sameOrigin(c *fiber.Ctx) bool {
	if site := c.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := c.Get(fiber.HeaderOrigin)
	if origin == "" || origin == "null" {
		return true // an old browser: the CSRF token decides
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == string(c.Request().Host())
}

// securityHeaders: nothing but this origin's own files, no framing, no
// referrer to other sites (the query of a search names keys), no caching of
// pages that show the store.
func securityHeaders(c *fiber.Ctx) {
	c.Set("Content-Security-Policy", "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("Referrer-Policy", "same-origin")
	c.Set("X-Frame-Options", "DENY")
	c.Set(fiber.HeaderCacheControl, "no-store")
}

func (ui *Console) asset(c *fiber.Ctx) error {
	name := c.Params("file")
	b, err := fs.ReadFile(ui.static, name)
	if err != nil || strings.Contains(name, "/") {
		return c.SendStatus(http.StatusNotFound)
	}
	c.Set("X-Content-Type-Options", "nosniff")
	// The pages ask for ?v=<hash of the file> (assetURL): that answer never
	// changes; any other is checked again each time.
	if v := c.Query("v"); v != "" && v == assetVersion(name) {
		c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	} else {
		c.Set(fiber.HeaderCacheControl, "no-cache")
	}
	c.Type(strings.TrimPrefix(name[strings.LastIndexByte(name, '.'):], "."))
	return c.Send(b)
}

// errorPage is the data of the error template.
type errorPage struct {
	layout
	Status  int
	Title   string
	Message string
}

// renderError shows err as a page, with the status the one table
// (api/problem) gives its code. Internal errors are logged and shown with a generic message.
func (ui *Console) renderError(c *fiber.Ctx, sess *session, err error) error {
	code := errs.CodeOf(err)
	status := problem.Status(code)
	if status >= 500 {
		ui.log.Error("console page failed", "path", c.Path(), "status", status, "err", err)
	}
	return ui.render(c, status, "error", errorPage{
		layout:  ui.layout(sess, "Error"),
		Status:  status,
		Title:   http.StatusText(status),
		Message: errs.MessageOf(err),
	})
}

func (ui *Console) render(c *fiber.Ctx, status int, page string, data any) error {
	t, ok := ui.pages[page]
	if !ok {
		return fmt.Errorf("console: no page %q", page)
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", data); err != nil {
		return fmt.Errorf("console: render %s: %w", page, err)
	}
	c.Status(status)
	c.Type("html", "utf-8")
	return c.SendString(b.String())
}
