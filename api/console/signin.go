package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/openid"
	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Two ways in: a named person through an identity provider (OpenID
// Connect, api/openid), whose role comes from the configured people
// rules; or a shared API token pasted into a form, for small installs,
// which names the token and not a person.

// PersonSignIn is an identity provider's sign-in (openid.Provider).
type PersonSignIn interface {
	Start(ctx context.Context) (string, openid.Flow, error)
	Finish(ctx context.Context, f openid.Flow, q url.Values) (openid.Identity, error)
}

// flowTTL bounds a sign-in at the provider (a login page, a second factor).
const flowTTL = 10 * time.Minute

// flowCookie keeps the flow (and where to return) while the person is at
// the provider. SameSite=Lax: the provider sends the browser back with a
// cross-site navigation, on which a Strict cookie would not come along.
const flowCookie = "n8n-guard-ui-signin"

type flowState struct {
	Flow   openid.Flow `json:"f"`
	Resume string      `json:"r,omitempty"` // a sealed draft
}

// A draft is a form sent after its session ended: where to come back to
// and what the person had typed, sealed, carried through the sign-in.
type draft struct {
	Return string            `json:"r"`
	Form   map[string]string `json:"f,omitempty"`
}

const (
	draftTTL = time.Hour
	// maxDraft bounds the typed text carried through a sign-in (it rides
	// in a web address): the key form's reason is at most 2,000 characters.
	maxDraft = 6 << 10
	// draftKept is shown above a form filled from a draft.
	draftKept = "Your session had ended before your decision was saved. You are signed in again and what you typed is kept below: check it and send it again."
)

func (ui *Console) sealDraft(d draft) string {
	s, err := ui.seal.seal("draft", d, ui.now().Add(draftTTL))
	if err != nil {
		return ""
	}
	return s
}

func (ui *Console) openDraft(s string) (draft, bool) {
	var d draft
	if s == "" || !ui.seal.open("draft", s, ui.now(), &d) {
		return draft{}, false
	}
	d.Return = safeReturn(d.Return)
	return d, true
}

// safeReturn keeps a return address inside the console: a path under
// Prefix, never another host.
func safeReturn(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(s, "//") || strings.Contains(s, `\`) {
		return Prefix
	}
	u.Path, u.RawPath = path.Clean("/"+u.Path), ""
	if (u.Path != Prefix && !strings.HasPrefix(u.Path, Prefix+"/")) || strings.HasPrefix(u.Path, Prefix+"/signin") {
		return Prefix
	}
	return u.RequestURI()
}

// returnTo is the page a form was sent from (the same-origin Referer),
// where the person comes back to after signing in again.
func returnTo(c *fiber.Ctx) string {
	ref, err := url.Parse(c.Get(fiber.HeaderReferer))
	if err != nil || ref.Host != string(c.Request().Host()) {
		return Prefix
	}
	return safeReturn(ref.RequestURI())
}

type signInPage struct {
	layout
	Problem  string
	Token    bool   // the shared token form is offered
	OIDC     bool   // the identity provider's button is offered
	Provider string // its name
	Resume   string // a sealed draft to carry through
	OIDCURL  string
}

func (ui *Console) signInData(problem, resume string) signInPage {
	p := signInPage{layout: ui.layout(nil, "Sign in"), Problem: problem, Token: ui.signIn != nil,
		OIDC: ui.openID != nil, Provider: ui.provider, Resume: resume, OIDCURL: Prefix + "/signin/oidc"}
	if resume != "" {
		p.OIDCURL += "?" + url.Values{"resume": {resume}}.Encode()
	}
	return p
}

func (ui *Console) signInPage(c *fiber.Ctx, _ *session) error {
	resume := c.Query("resume")
	if _, ok := ui.openDraft(resume); !ok {
		resume = ""
	}
	return ui.render(c, http.StatusOK, "signin", ui.signInData("", resume))
}

// signInAgain answers a request whose session is gone: a page asked for
// leads to the sign-in and back to it; a form sent is kept, and the
// sign-in page that asks for the sign-in carries it back to its page.
func (ui *Console) signInAgain(c *fiber.Ctx, method string) error {
	if method == fiber.MethodGet {
		if back := safeReturn(c.OriginalURL()); back == Prefix {
			return c.Redirect(Prefix+"/signin", http.StatusSeeOther)
		}
		return c.Redirect(Prefix+"/signin?"+url.Values{"resume": {ui.sealDraft(draft{Return: safeReturn(c.OriginalURL())})}}.Encode(), http.StatusSeeOther)
	}
	d := draft{Return: returnTo(c), Form: map[string]string{}}
	size := 0
	for k, v := range c.Request().PostArgs().All() {
		if name := string(k); name != "csrf" && name != "token" {
			d.Form[name] = string(v)
			size += len(k) + len(v)
		}
	}
	why := "Your session has ended (it lasts 12 hours, or you signed out). Sign in again: you come back to the page with what you typed."
	if size > maxDraft {
		d.Form = nil
		why = "Your session has ended, and the form was too large to keep: sign in again and fill it in again."
	}
	ui.log.Info("console: a form arrived after its session ended; kept it for after the sign-in", "path", c.Path(), "kept", d.Form != nil)
	return ui.render(c, http.StatusUnauthorized, "signin", ui.signInData(why, ui.sealDraft(d)))
}

// signInSubmit exchanges the token from the form (a POST body, never a
// URL) for a session cookie.
func (ui *Console) signInSubmit(c *fiber.Ctx, _ *session) error {
	resume := formBody(c, "resume")
	if _, ok := ui.openDraft(resume); !ok {
		resume = ""
	}
	if ui.signIn == nil {
		return ui.render(c, http.StatusForbidden, "signin", ui.signInData("Sign-in with a shared token is turned off here: sign in with "+ui.provider+".", resume))
	}
	if wait, refused := ui.signIns.refuse(c, ui.now()); refused {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(wait))
		return ui.render(c, http.StatusTooManyRequests, "signin", ui.signInData(
			fmt.Sprintf("Too many sign-in attempts from your address (at most %d a minute). Wait %d seconds, then try again.", ui.signIns.perMinute(), wait), resume))
	}
	token := strings.TrimSpace(formBody(c, "token"))
	who, err := ui.signIn(token)
	if err != nil {
		ui.log.Info("console: sign-in refused", "client", ui.signIns.client(c).String(), "why", errs.MessageOf(err))
		why := "That token is not valid: check that you copied all of it."
		if errs.CodeOf(err) != problem.Unauthorized {
			why = errs.MessageOf(err)
		}
		return ui.render(c, problem.Status(errs.CodeOf(err)), "signin", ui.signInData(why, resume))
	}
	next, err := ui.signedIn(c, who, viaToken, nil, resume)
	if err != nil {
		return err
	}
	return c.Redirect(next, http.StatusSeeOther)
}

// signedIn opens a session for who and says where to go next: the page a
// draft returns to (with its form), or the overview. A new session id at
// every sign-in: a cookie planted before it is worth nothing after it.
func (ui *Console) signedIn(c *fiber.Ctx, who access.Principal, via string, groups []string, resume string) (string, error) {
	if old := ui.sessions.get(c.UserContext(), c.Cookies(cookieName(c)), ui.now()); old != nil {
		ui.sessions.end(c.UserContext(), old, ui.now())
	}
	sess := ui.sessions.start(who, via, ui.now())
	sess.groups = ui.people.Named(groups)
	if err := ui.sessions.setCookie(c, sess); err != nil {
		return "", err
	}
	ui.log.Info("console: signed in", "who", who.Name, "via", via, "role", who.Role, "namespaces", who.Namespaces)
	d, ok := ui.openDraft(resume)
	if !ok {
		return Prefix, nil
	}
	if len(d.Form) == 0 {
		return d.Return, nil
	}
	sep := "?"
	if strings.Contains(d.Return, "?") {
		sep = "&"
	}
	return d.Return + sep + url.Values{"draft": {resume}}.Encode(), nil
}

// oidcStart sends the browser to the identity provider with a new flow
// (state, nonce, PKCE), kept sealed in a cookie until it comes back.
func (ui *Console) oidcStart(c *fiber.Ctx, _ *session) error {
	if ui.openID == nil {
		return errs.Errorf(errs.NotFound, "sign-in through an identity provider is not configured here (console.oidc)")
	}
	resume := c.Query("resume")
	if _, ok := ui.openDraft(resume); !ok {
		resume = ""
	}
	u, f, err := ui.openID.Start(c.UserContext())
	if err != nil {
		ui.log.Warn("console: the identity provider cannot start a sign-in", "err", errs.MessageOf(err))
		return ui.render(c, problem.Status(errs.CodeOf(err)), "signin", ui.signInData(errs.MessageOf(err), resume))
	}
	v, err := ui.seal.seal("flow", flowState{Flow: f, Resume: resume}, ui.now().Add(flowTTL))
	if err != nil {
		return err
	}
	c.Cookie(&fiber.Cookie{Name: flowCookie, Value: v, Path: Prefix + "/signin/oidc", Expires: ui.now().Add(flowTTL),
		HTTPOnly: true, Secure: c.Secure(), SameSite: fiber.CookieSameSiteLaxMode})
	return c.Redirect(u, http.StatusSeeOther)
}

// oidcCallback finishes the flow: the provider's answer must match the
// flow this browser started, the ID token must be valid, and the person
// must have a role in the people rules.
func (ui *Console) oidcCallback(c *fiber.Ctx, _ *session) error {
	if ui.openID == nil {
		return errs.Errorf(errs.NotFound, "sign-in through an identity provider is not configured here (console.oidc)")
	}
	var st flowState
	ok := ui.seal.open("flow", c.Cookies(flowCookie), ui.now(), &st)
	c.Cookie(&fiber.Cookie{Name: flowCookie, Value: "", Path: Prefix + "/signin/oidc", Expires: time.Unix(0, 0),
		HTTPOnly: true, Secure: c.Secure(), SameSite: fiber.CookieSameSiteLaxMode})
	if !ok {
		return ui.refuseSignIn(c, errs.Errorf(problem.Unauthorized, "this sign-in was not started in this browser, or it took more than 10 minutes: start it again"), "")
	}
	q, err := url.ParseQuery(string(c.Request().URI().QueryString()))
	if err != nil {
		return ui.refuseSignIn(c, errs.Errorf(problem.Unauthorized, "the identity provider's answer cannot be read: %v", err), st.Resume)
	}
	id, err := ui.openID.Finish(c.UserContext(), st.Flow, q)
	if err != nil {
		return ui.refuseSignIn(c, err, st.Resume)
	}
	// The name is a person identifier like any other: one that holds an
	// invisible character or mixes scripts is not let in to decide.
	if err := keystore.CheckPerson("name", id.Name); err != nil {
		return ui.refuseSignIn(c, errs.Errorf(problem.Unauthorized, "the identity provider named the person %q: %s", id.Name, errs.MessageOf(err)), st.Resume)
	}
	who, ok := ui.people.Principal(id.Name, id.Groups)
	who.Subject = id.Subject
	if !ok {
		return ui.refuseSignIn(c, errs.Errorf(errs.Forbidden,
			"%s signed in at %s but has no role in this console: an admin gives them (or one of their groups) a role under console.people", id.Name, ui.provider), st.Resume)
	}
	next, err := ui.signedIn(c, who, viaOIDC, id.Groups, st.Resume)
	if err != nil {
		return err
	}
	// The browser came here by a redirect from the provider, a cross-site
	// navigation: it would not send the Strict session cookie on a
	// redirect onwards. A page of this site that moves on does.
	return ui.render(c, http.StatusOK, "signedin", signedInPage{layout: ui.layout(nil, "Signed in"), Name: who.Name, Next: next})
}

type signedInPage struct {
	layout
	Name, Next string
}

func (ui *Console) refuseSignIn(c *fiber.Ctx, err error, resume string) error {
	ui.log.Info("console: sign-in through the identity provider refused", "why", errs.MessageOf(err))
	return ui.render(c, problem.Status(errs.CodeOf(err)), "signin", ui.signInData("Sign-in refused: "+errs.MessageOf(err), resume))
}

// session is the request's live session, or nil. A person's role is
// read again from the people rules at every request, so a change to them
// (after a restart) applies at once: a person no rule names any more is
// signed out.
func (ui *Console) session(c *fiber.Ctx) *session {
	sess := ui.sessions.get(c.UserContext(), c.Cookies(cookieName(c)), ui.now())
	if sess == nil || sess.via != viaOIDC {
		return sess
	}
	who, ok := ui.people.Principal(sess.who.Name, sess.groups)
	if !ok {
		ui.log.Info("console: a session ended: no people rule names its person any more", "who", sess.who.Name)
		return nil
	}
	who.Subject = sess.who.Subject
	sess.who = who
	return sess
}

func (ui *Console) signOut(c *fiber.Ctx, sess *session) error {
	ui.sessions.end(c.UserContext(), sess, ui.now())
	clearSessionCookie(c)
	return c.Redirect(Prefix+"/signin", http.StatusSeeOther)
}
