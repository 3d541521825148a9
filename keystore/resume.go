package keystore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/n8n-guard/n8n-guard/errs"
)

// Where resume calls may go. A resume call carries the resume secret (the
// credential of every Wait node), so a resume URL is accepted only when it
// points at an n8n instance the operator configured, at n8n's
// waiting-webhook path: a caller's request alone never names where the
// guard sends the secret.
//
//	no origin configured                 -> refused: resume_unconfigured (parking is off)
//	scheme, host or port not configured  -> refused: resume_origin
//	path outside the waiting-webhook one -> refused: resume_path
//	another execution than the caller's  -> refused: resume_execution (CheckExecution)
//
// The rule names are the problem's field rules (field resume_url).
//
// n8n's resume URLs carry its WEBHOOK_URL, which is often public (the
// address senders and people see) while the guard reaches n8n privately
// (http://n8n:5678). A public origin may name the address the guard calls
// instead (WithPublic): the resume URL is checked against the public
// origin, and the call goes to the private address with the same path and
// query; nothing else changes (the method, the header credential, the
// body). The guard's calls then never leave the private network.

// DefaultResumePath is n8n's waiting-webhook path ($execution.resumeUrl is
// <webhook base>/webhook-waiting/<execution id>); n8n's
// N8N_ENDPOINT_WEBHOOK_WAIT changes it.
const DefaultResumePath = "/webhook-waiting/"

// ResumeTargets are the n8n instances resume calls may go to. The zero
// value allows none: every resume URL is refused (resume_unconfigured).
type ResumeTargets struct {
	origins []string   // scheme://host:port, lower case, default ports explicit
	bases   []string   // each origin's path prefix (n8n's N8N_PATH), "" or "/n8n"
	calls   []*url.URL // where a resume URL of the origin is called (scheme and host only); nil: the origin itself
	path    string     // "/webhook-waiting/": the path after the base
}

// NewResumeTargets makes the targets of the given origins (n8n's base
// URLs, e.g. https://n8n.example.org or http://n8n:5678; a path in them,
// as n8n's N8N_PATH puts one, is where its webhooks start) and
// waiting-webhook path (empty: DefaultResumePath; a bare
// segment such as "webhook-wait" as n8n's N8N_ENDPOINT_WEBHOOK_WAIT
// takes it).
func NewResumeTargets(origins []string, path string) (ResumeTargets, error) {
	var t ResumeTargets
	for _, o := range origins {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return ResumeTargets{}, fmt.Errorf("resume origin %q: want an absolute http:// or https:// address of an n8n instance", o)
		}
		t.origins = append(t.origins, originOf(u))
		t.bases = append(t.bases, baseOf(u))
		t.calls = append(t.calls, nil)
	}
	path = strings.Trim(strings.TrimSpace(path), "/")
	if path == "" {
		t.path = DefaultResumePath
	} else {
		if strings.ContainsAny(path, "?#") || strings.Contains(path, "..") {
			return ResumeTargets{}, fmt.Errorf("resume path %q: want n8n's waiting-webhook path, e.g. webhook-waiting", path)
		}
		t.path = "/" + path + "/"
	}
	return t, nil
}

// WithPublic is t accepting the resume URLs of public (n8n's WEBHOOK_URL,
// e.g. https://n8n.example.org) and calling them at private (the address
// the guard reaches the same n8n at, e.g. http://n8n:5678): same path,
// same query, only the scheme, host and port replaced. Empty private: the
// public address is called itself. The public origin is checked first, so
// it is mapped even when t lists it already. A path in private must be
// public's (n8n's N8N_PATH is the same behind both): the guard does not
// rewrite paths.
func (t ResumeTargets) WithPublic(public, private string) (ResumeTargets, error) {
	pu, err := absoluteHTTP(public)
	if err != nil {
		return ResumeTargets{}, fmt.Errorf("n8n's public webhook address %q: %w", public, err)
	}
	var call *url.URL
	if strings.TrimSpace(private) != "" {
		if call, err = absoluteHTTP(private); err != nil {
			return ResumeTargets{}, fmt.Errorf("the address the guard calls n8n at %q: %w", private, err)
		}
		if pb, cb := baseOf(pu), baseOf(call); cb != "" && cb != pb {
			return ResumeTargets{}, fmt.Errorf("the address the guard calls n8n at %q has the path %q, n8n's public webhook address %q has %q: the guard calls the resume URL's own path at the private address, so both must have the same path (n8n's N8N_PATH), or the private one none", private, cb, public, pb)
		}
		call = &url.URL{Scheme: strings.ToLower(call.Scheme), Host: call.Host}
	}
	out := ResumeTargets{path: t.path,
		origins: append([]string{originOf(pu)}, t.origins...),
		bases:   append([]string{baseOf(pu)}, t.bases...),
		calls:   append([]*url.URL{call}, t.calls...)}
	return out, nil
}

// absoluteHTTP parses an operator's address of n8n: absolute http(s),
// a host, no user information, query or fragment.
func absoluteHTTP(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	switch {
	case err != nil:
		return nil, fmt.Errorf("not a URL: %w", err)
	case u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		return nil, errors.New("want an absolute http:// or https:// address, e.g. https://n8n.example.org")
	case u.User != nil:
		return nil, errors.New("want no user information in it")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, errors.New("want no query or fragment in it")
	}
	return u, nil
}

// baseOf is the path prefix of an n8n address ("" or "/n8n"): its path
// without the trailing slash and the public API's /api/v1.
func baseOf(u *url.URL) string {
	return strings.TrimSuffix(strings.TrimSuffix(u.EscapedPath(), "/"), "/api/v1")
}

// Configured says whether any n8n instance is configured.
func (t ResumeTargets) Configured() bool { return len(t.origins) > 0 }

// Origins are the configured origins, for the start's log line.
func (t ResumeTargets) Origins() []string {
	out := make([]string, len(t.origins))
	for i, o := range t.origins {
		out[i] = o + t.bases[i]
		if c := t.calls[i]; c != nil {
			out[i] += " (called at " + c.String() + ")"
		}
	}
	return out
}

// Path is the waiting-webhook path resume URLs must start with.
func (t ResumeTargets) Path() string {
	if t.path == "" {
		return DefaultResumePath
	}
	return t.path
}

// Check refuses a resume URL that does not point at a configured n8n's
// waiting-webhook path, as an invalid_request on field resume_url (nil for
// an empty URL: nothing to call).
func (t ResumeTargets) Check(raw string) error {
	if raw == "" {
		return nil
	}
	if rule, why := t.why(raw); rule != "" {
		return &errs.Error{Code: errs.InvalidRequest, Message: "resume_url " + why + "; nothing was recorded",
			Fields: []errs.FieldError{{Field: "resume_url", Rule: rule}}}
	}
	return nil
}

// Refuses says why the guard must not call raw with the resume secret
// ("": it may).
func (t ResumeTargets) Refuses(raw string) string {
	_, why, _ := t.match(raw)
	return why
}

// Call is the URL the guard calls for the resume URL raw: raw itself, or,
// when raw is of a public origin with a private address, raw's path and
// query at that address. why says why raw must not be called ("" : it
// may, and call is set).
func (t ResumeTargets) Call(raw string) (call, why string) {
	_, why, i := t.match(raw)
	if why != "" {
		return "", why
	}
	if t.calls[i] == nil {
		return raw, ""
	}
	u, _ := url.Parse(raw) // match parsed it
	u.Scheme, u.Host = t.calls[i].Scheme, t.calls[i].Host
	return u.String(), ""
}

func (t ResumeTargets) why(raw string) (rule, why string) {
	rule, why, _ = t.match(raw)
	return rule, why
}

// match is why raw is refused (rule and text), or the index of the target
// it is of.
func (t ResumeTargets) match(raw string) (rule, why string, at int) {
	if !t.Configured() {
		return "resume_unconfigured", "cannot be used: no n8n instance is configured for resume calls (set N8N_URL, or n8n.resume_origins / N8N_GUARD_RESUME_ORIGINS in the guard's configuration), so parking is off", -1
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "http_url", "must be an absolute http:// or https:// URL", -1
	}
	if u.User != nil {
		return "resume_origin", "must not carry user information", -1
	}
	origin := originOf(u)
	var wants []string
	for i, o := range t.origins {
		if o != origin {
			continue
		}
		want := t.bases[i] + t.Path()
		if waitingPath(u, want) {
			return "", "", i
		}
		wants = append(wants, want)
	}
	if len(wants) == 0 {
		return "resume_origin", fmt.Sprintf("points at %s, which is not a configured n8n instance (%s)", origin, strings.Join(t.origins, ", ")), -1
	}
	return "resume_path", fmt.Sprintf("must be n8n's waiting-webhook address %s<execution id> ($execution.resumeUrl)", strings.Join(wants, "… or ")), -1
}

// waitingPath says whether u's path is below prefix, as sent and as
// decoded: an encoded "../" cannot climb out of it.
func waitingPath(u *url.URL, prefix string) bool {
	p := u.EscapedPath()
	dec, err := url.PathUnescape(p)
	return err == nil && strings.HasPrefix(p, prefix) && strings.HasPrefix(dec, prefix) && len(dec) > len(prefix) &&
		!strings.Contains(dec, "..")
}

// originOf is u's scheme://host:port in lower case with the default port
// written out, so http://N8N and http://n8n:80 are one origin.
func originOf(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(host, port)
}

// The execution a resume URL wakes is in its path
// (<base>/webhook-waiting/<execution id>[/<suffix>], and on n8n 2.x a
// ?signature= of it after). A caller holding any reserve token could
// otherwise name another execution's id: on 1.x the guard's call, with
// the resume secret, would wake that execution early (2.x refuses a call
// without that execution's signature, which the caller does not have).
// So a resume URL is accepted only for the execution that sends it: the
// one its reserve names (request_id "<execution id>:…" as the shipped
// workflows and the community node send it, and an owner "n8n
// <workflow> exec <id>"), and on a fail the one that holds the key's
// lease (its owner). The same rule on 1.x and 2.x: the id is in the path
// on both.

// CheckExecution refuses raw (a resume URL that passed Check) unless it
// wakes the execution the caller is: each of executions (the ids the
// request names; "" is ignored) must be the URL's, and at least one must
// be given. nil for an empty URL.
func (t ResumeTargets) CheckExecution(raw string, executions ...string) error {
	if raw == "" {
		return nil
	}
	woken := t.execution(raw)
	var named []string
	for _, e := range executions {
		if e != "" {
			named = append(named, e)
		}
	}
	refuse := func(why string) error {
		return &errs.Error{Code: errs.InvalidRequest, Message: "resume_url " + why + "; nothing was recorded",
			Fields: []errs.FieldError{{Field: "resume_url", Rule: "resume_execution"}}}
	}
	if len(named) == 0 {
		return refuse(`wakes an execution, but the key's reserve does not say which execution it is: reserve with request_id "<execution id>:…" ($execution.id first, as the shipped workflows and the n8n-guard node do) or owner "n8n <workflow id> exec <execution id>"`)
	}
	for _, e := range named {
		if e != woken {
			return refuse(fmt.Sprintf("wakes execution %q, but the request is execution %q's: a resume URL must be the execution's own ($execution.resumeUrl)", woken, e))
		}
	}
	return nil
}

// execution is the execution id raw's path names after the waiting-webhook
// path ("" when raw is not a configured n8n's resume URL).
func (t ResumeTargets) execution(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	origin := originOf(u)
	for i, o := range t.origins {
		want := t.bases[i] + t.Path()
		if o != origin || !waitingPath(u, want) {
			continue
		}
		// The segment as sent, then decoded: an encoded "/" stays in the
		// id ("41%2F421" is not execution 41's, nor 421's).
		seg, _, _ := strings.Cut(strings.TrimPrefix(u.EscapedPath(), want), "/")
		id, err := url.PathUnescape(seg)
		if err != nil {
			return ""
		}
		return id
	}
	return ""
}

// RequestExecution is the execution id a reserve's request_id names: what
// precedes its first ":" ("<execution id>:<node>:<run>:<item>" as the
// shipped workflows and the n8n-guard node write it); "" without one.
func RequestExecution(requestID string) string {
	id, _, ok := strings.Cut(strings.TrimSpace(requestID), ":")
	if !ok {
		return ""
	}
	return strings.TrimSpace(id)
}

// holderRE reads a holder as the guard's workflows and node write it:
// "n8n <workflow> exec <id>", "n8n execution <id>".
var holderRE = regexp.MustCompile(`(?i)^n8n\s+(?:([A-Za-z0-9_-]{1,64})\s+)?exec(?:ution)?\s*[:#]?\s*([A-Za-z0-9_-]{1,64})$`)

// ExecutionOf is the workflow and the n8n execution a holder (a reserve's
// owner) names ("": none).
func ExecutionOf(holder string) (workflow, execution string) {
	if m := holderRE.FindStringSubmatch(strings.TrimSpace(holder)); m != nil {
		return m[1], m[2]
	}
	return "", ""
}
