package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client calls one n8n instance's public API.
type Client struct {
	base string // the instance's address, e.g. http://n8n:5678
	key  string
	http *http.Client
}

// New returns a client of the n8n at base, its address (e.g.
// http://n8n:5678); the API's own base (…/api/v1), the form N8N_API_URL
// was documented in, is accepted too. timeout bounds each call; 0 leaves
// that to the caller's context. It follows no redirect: Go would send the
// API key along, to whatever host the redirect names; a 3xx is an *Error.
func New(base, key string, timeout time.Duration) *Client {
	base = strings.TrimSuffix(strings.TrimRight(base, "/"), "/api/v1")
	return &Client{base: base, key: key, http: noRedirects(nil, timeout)}
}

// Base is the instance's address the client calls.
func (c *Client) Base() string { return c.base }

// bodyLimit bounds what is read of any answer: a page of 250 workflows
// with their nodes is the largest n8n sends.
const bodyLimit = 64 << 20

// Error is an answer of n8n that is not a success, said the way a user
// can act on it.
type Error struct {
	Method, Path string
	Status       int
	// Message is n8n's own message, or what the answer had instead.
	Message string
}

func (e *Error) Error() string {
	if e.Status/100 == 3 { // Message says the status (redirected)
		return fmt.Sprintf("n8n %s %s: %s", e.Method, e.Path, e.Message)
	}
	hint := ""
	switch e.Status {
	case http.StatusUnauthorized:
		hint = ": n8n refused the API key (wrong, expired or revoked; create one under Settings → n8n API)"
	case http.StatusForbidden:
		hint = ": the API key may not do this (a scope it lacks, or a project it cannot reach; use a key of the instance owner or of a member of that project)"
	case http.StatusNotFound:
		hint = ": not found (gone, or in a project this API key cannot reach)"
	}
	return fmt.Sprintf("n8n %s %s: HTTP %d %s%s", e.Method, e.Path, e.Status, e.Message, hint)
}

// StatusCode and Reason let a package that does not import this one (notify)
// read the refusal through an interface of its own.
func (e *Error) StatusCode() int { return e.Status }
func (e *Error) Reason() string  { return e.Message }

// ErrTooLarge is an answer longer than the guard reads (bodyLimit).
var ErrTooLarge = fmt.Errorf("the answer is larger than the %d MiB the guard reads", bodyLimit>>20)

// ErrUnreachable wraps every failure to reach n8n at all.
var ErrUnreachable = errors.New("n8n unreachable")

// Do calls the public API: path is below /api/v1, body (when not nil) is
// sent as JSON and a success's answer decoded into out (when not nil). A
// refusal is an *Error, a failure to reach n8n wraps ErrUnreachable, an
// answer over the body limit wraps ErrTooLarge. n8nsetup makes its calls
// through it, so both adapters share one base URL, key and error text.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	return c.request(ctx, method, "/api/v1", path, body, out)
}

// request calls path below root on the instance (/api/v1, or another of
// n8n's roots such as /webhook-waiting) with the API key; errors name path.
func (c *Client) request(ctx context.Context, method, root, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+root+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("X-N8N-API-KEY", c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, bodyLimit+1))
	if err != nil {
		// Cut off while it arrived (a timeout, a reset): as unreachable.
		return fmt.Errorf("%w at %s: reading %s %s: %v", ErrUnreachable, c.base, method, path, err)
	}
	if len(raw) > bodyLimit {
		return fmt.Errorf("n8n %s %s: %w", method, path, ErrTooLarge)
	}
	if resp.StatusCode/100 == 3 {
		return &Error{Method: method, Path: path, Status: resp.StatusCode, Message: redirected(resp)}
	}
	if resp.StatusCode/100 != 2 {
		return &Error{Method: method, Path: path, Status: resp.StatusCode, Message: message(resp.StatusCode, raw)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("n8n %s %s: answer is not JSON (is %s n8n?): %w", method, path, c.base, err)
	}
	return nil
}

// message is what an error answer says: n8n's {"message"}, else the start
// of the body, else the status's name.
func message(status int, raw []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Message != "" {
		return m.Message
	}
	s := strings.TrimSpace(string(raw))
	switch {
	case s == "":
		return http.StatusText(status)
	case strings.HasPrefix(s, "<"):
		return "(an HTML page: is this n8n's address?)"
	case len(s) > 300:
		return s[:300] + "…"
	}
	return s
}

// redirected is what a 3xx answer says: the client follows no redirect,
// and the address to call is the user's to set.
func redirected(resp *http.Response) string {
	to := "without a Location"
	if u, err := resp.Location(); err == nil {
		loc := u.Redacted()
		if len(loc) > 300 {
			loc = loc[:300] + "…"
		}
		to = "to " + loc
	}
	return fmt.Sprintf("n8n answered %d redirect %s; the guard follows no redirects: set N8N_API_URL to the address n8n answers at", resp.StatusCode, to)
}

// Ping makes one cheap authenticated call, so a wrong key is the first
// thing said.
func (c *Client) Ping(ctx context.Context) error {
	return c.Do(ctx, http.MethodGet, "/workflows?limit=1", nil, nil)
}
