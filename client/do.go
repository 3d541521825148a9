package client

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

	"github.com/n8n-guard/n8n-guard/api/problem"
)

// Client calls one running n8n-guard.
type Client struct {
	base    string
	token   string
	timeout time.Duration
	http    *http.Client // bounded by timeout
	stream  *http.Client // for a backup: unbounded once the answer began
}

// Options are how a Client calls.
type Options struct {
	// Token is the API token; empty: no Authorization header.
	Token string
	// Timeout bounds each call (0: none). A backup's copy may take longer:
	// for it, Timeout bounds the wait for the answer to begin.
	Timeout time.Duration
	// Transport replaces http.DefaultTransport, e.g. a pool of as many
	// connections as the bench has clients.
	Transport http.RoundTripper
}

// New returns a client of the n8n-guard at base, e.g. http://127.0.0.1:8080.
func New(base string, o Options) *Client {
	return &Client{
		base: strings.TrimRight(base, "/"), token: o.Token, timeout: o.Timeout,
		http:   &http.Client{Transport: o.Transport, Timeout: o.Timeout},
		stream: &http.Client{Transport: o.Transport},
	}
}

// Base is the server's address the client calls.
func (c *Client) Base() string { return c.base }

// bodyLimit bounds what is read of an answer: a page of 1,000 records
// with their histories is the largest the API sends (a backup streams).
const bodyLimit = 32 << 20

// Error is an answer that is not a success: the server's problem+json
// when it sent one.
type Error struct {
	Method, Path string
	Status       int
	// Problem is the server's problem; nil when the body was something
	// else (a proxy's page), whose start is in Body.
	Problem *problem.Problem
	Body    string
}

func (e *Error) Error() string {
	if p := e.Problem; p != nil {
		msg := fmt.Sprintf("%s (HTTP %d): %s", p.Code, p.Status, p.Detail)
		for _, f := range p.Fields {
			msg += fmt.Sprintf("\n  %s: %s", f.Field, f.Rule)
		}
		return msg
	}
	msg := fmt.Sprintf("%s %s: HTTP %d", e.Method, e.Path, e.Status)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Code is the problem's code, empty when the server sent none.
func (e *Error) Code() string {
	if e.Problem == nil {
		return ""
	}
	return string(e.Problem.Code)
}

// ErrUnreachable wraps every failure to reach the server at all.
var ErrUnreachable = errors.New("unreachable")

// Do sends body (JSON; []byte as it is) to path and decodes a success into
// out (nil: the answer is read and dropped). Any other status is an *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, c.http, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return answerError(method, path, resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

func (c *Client) send(ctx context.Context, hc *http.Client, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, err
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("n8n-guard at %s: %w: %w", c.base, ErrUnreachable, err)
	}
	return resp, nil
}

// answerError is the server's problem, or the start of what came instead.
func answerError(method, path string, status int, raw []byte) error {
	e := &Error{Method: method, Path: path, Status: status}
	var p problem.Problem
	if json.Unmarshal(raw, &p) == nil && p.Code != "" {
		e.Problem = &p
		return e
	}
	e.Body = strings.TrimSpace(string(raw))
	if len(e.Body) > 200 {
		e.Body = e.Body[:200] + "…"
	}
	return e
}
