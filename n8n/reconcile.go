package n8n

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Calling a check (keystore/check.go): an n8n workflow behind a Webhook
// node that looks in the target for the record an unknown attempt may
// have written, and answers with a Respond to Webhook node:
//
//	{"result": "found", "reference": "<the target's id>"}   the attempt took effect
//	{"result": "absent"}                                   it did not
//
// optionally with "workflow" and "execution" ($workflow.name,
// $execution.id), which go into the key's history. Anything else (another
// status, another body, no answer in time) is no usable answer: a 5xx, a
// 429 or no answer may be tried again; a 2xx with a body that says
// neither, a 4xx, cannot. An empty 2xx is how n8n 1.x answers a check
// workflow that failed (2.x: 500): tried again too.

// CheckRequest is what the guard posts to a check.
type CheckRequest struct {
	Namespace   string `json:"namespace"`
	Key         string `json:"key"`
	Destination string `json:"destination,omitempty"`
	Attempt     int    `json:"attempt"`
	// AttemptStartedAt is when the attempt was reserved: a record in the
	// target older than that is not this attempt's.
	AttemptStartedAt time.Time `json:"attempt_started_at"`
	// LeaseOwner is the owner the attempt's reserve named (the workflow
	// and execution of the holder, as the guard's node sends it).
	LeaseOwner string `json:"lease_owner,omitempty"`
}

// NewCheckRequest describes the attempt of the unknown record r.
func NewCheckRequest(r *keystore.Record) CheckRequest {
	started := r.CreatedAt
	for _, h := range r.History {
		if h.Event == keystore.HistoryReserved && h.Attempt == r.Attempt {
			started = h.At
		}
	}
	return CheckRequest{Namespace: r.Namespace, Key: r.Key, Destination: r.Destination, Attempt: r.Attempt,
		AttemptStartedAt: started.UTC(), LeaseOwner: r.Owner}
}

// CheckCaller calls one check's webhook.
type CheckCaller struct {
	URL string
	// Client is the HTTP client (nil: a default one; every call has
	// Timeout; redirects are never followed).
	Client  *http.Client
	Timeout time.Duration // one call (default 10 s)
	// Header and Secret: the Header Auth credential the Webhook node
	// checks (default header CheckDefaultHeader); empty Secret: none.
	Header string
	Secret string
}

// CheckOutcome is what one call of a check found out.
type CheckOutcome struct {
	Answer keystore.CheckAnswer
	// Retry: no usable answer, but one may come on another call (5xx,
	// 429, no answer, connection refused).
	Retry  bool
	Status int // the HTTP status, 0 without an answer
}

// checkReply is the body a check answers with.
type checkReply struct {
	Result    string `json:"result"`
	Reference string `json:"reference"`
	Workflow  any    `json:"workflow"`
	Execution any    `json:"execution"`
}

// Call calls the check once about req.
func (c *CheckCaller) Call(ctx context.Context, req CheckRequest) CheckOutcome {
	// The defaults: as the fields' comments say (zero or negative: 10 s).
	timeout, header := cmp.Or(max(c.Timeout, 0), 10*time.Second), cmp.Or(c.Header, CheckDefaultHeader)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := noRedirects(c.Client, 0) // the context bounds the call
	body, _ := json.Marshal(req)
	hr, err := newWebhookCall(ctx, http.MethodPost, c.URL, body, header, c.Secret)
	if err != nil {
		return failed(0, false, "the check's URL cannot be called: "+err.Error())
	}
	resp, err := client.Do(hr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return failed(0, true, fmt.Sprintf("the check did not answer within %s", timeout))
		}
		return failed(0, true, "the check could not be reached: "+resumeShortError(err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return failed(resp.StatusCode, true, "the check's answer broke off: "+resumeShortError(err))
	}
	switch s := resp.StatusCode; {
	case s >= 500, s == http.StatusTooManyRequests, s == http.StatusRequestTimeout:
		return failed(s, true, fmt.Sprintf("the check answered %d (%s)", s, resumeMessage(raw)))
	case s < 200 || s >= 300:
		return failed(s, false, fmt.Sprintf("the check answered %d (%s)", s, resumeMessage(raw)))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		// n8n 1.x answers so when the check workflow failed before its
		// Respond to Webhook node (2.x answers 500): worth another try.
		return failed(resp.StatusCode, true, fmt.Sprintf("the check answered %d with an empty body (the workflow failed before it answered)", resp.StatusCode))
	}
	var rep checkReply
	if err := json.Unmarshal(bytes.TrimSpace(raw), &rep); err != nil {
		// n8n's "Respond to Webhook" with all items answers an array.
		var arr []checkReply
		if json.Unmarshal(bytes.TrimSpace(raw), &arr) != nil || len(arr) != 1 {
			return failed(resp.StatusCode, false, "the check's answer is not the JSON object {\"result\": \"found\"|\"absent\", ...}: "+quoteStart(raw))
		}
		rep = arr[0]
	}
	a := keystore.CheckAnswer{Workflow: clip(scalar(rep.Workflow), 80), Execution: clip(scalar(rep.Execution), 40)}
	switch rep.Result {
	case "found":
		ref := strings.TrimSpace(rep.Reference)
		if ref == "" || len(ref) > 512 || !utf8.ValidString(ref) || strings.IndexFunc(ref, unicode.IsControl) >= 0 {
			a.Result, a.Detail = keystore.CheckFailed, "the check answered found without a usable reference (1-512 characters, no control characters)"
			return CheckOutcome{Answer: a, Status: resp.StatusCode}
		}
		a.Result, a.Reference = keystore.CheckFound, ref
	case "absent":
		a.Result = keystore.CheckAbsent
	default:
		a.Result, a.Detail = keystore.CheckFailed, fmt.Sprintf("the check answered result %q (want \"found\" or \"absent\")", clip(rep.Result, 40))
	}
	return CheckOutcome{Answer: a, Status: resp.StatusCode}
}

func failed(status int, retry bool, detail string) CheckOutcome {
	return CheckOutcome{Answer: keystore.CheckAnswer{Result: keystore.CheckFailed, Detail: detail}, Retry: retry, Status: status}
}

// scalar renders a JSON string or number ($execution.id is a string, a
// workflow id may be sent as a number).
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x)
	case float64:
		return fmt.Sprint(x)
	}
	return ""
}

func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func quoteStart(b []byte) string {
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "an empty body"
	}
	return fmt.Sprintf("%q", clip(s, 80))
}
