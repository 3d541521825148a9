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

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Resuming executions parked in a Wait node (keystore/park.go). A Wait
// node set to resume "On Webhook Call" keeps the execution in n8n's
// database and wakes it when its resume URL ($execution.resumeUrl,
// /webhook-waiting/<execution id>) is called. n8n answers such a call:
//
//	200            the execution was woken (and runs on by itself)
//	404            no such execution: deleted or pruned
//	409 "... is running already"   the execution has not reached its Wait node yet (a resume that came too early)
//	409 "... has finished already" it finished or was cancelled meanwhile
//	5xx, no answer n8n is down or restarting
//
// (packages/cli/src/webhooks/waiting-webhooks.ts, the same on 1.x and 2.x.)
// Only the first two kinds of 409 and 404 are final; the rest are tried
// again by the caller.

// ResumeSecretFile is the file in the guard's data folder that holds the
// resume secret when N8N_GUARD_RESUME_SECRET is not set.
const ResumeSecretFile = "resume-secret"

// ResumeDefaultHeader is the header the guard's resume calls carry, which
// the Wait node's Header Auth credential checks (n8n setup creates it).
const ResumeDefaultHeader = "X-N8n-Guard-Resume"

// CheckSecretFile is the file in the guard's data folder that holds the
// check secret when N8N_GUARD_CHECK_SECRET is not set: the credential of
// the checks' webhooks, a secret of its own so that a leaked check
// credential wakes no parked execution and a leaked resume credential
// answers no check.
const CheckSecretFile = "check-secret"

// CheckDefaultHeader is the header the guard's check calls carry, which
// the check webhook's Header Auth credential checks (n8n setup creates it).
const CheckDefaultHeader = "X-N8n-Guard-Check"

// ResumeCaller calls resume URLs. The zero value is usable: POST, no
// credential, a 10 s timeout.
type ResumeCaller struct {
	// Client is the HTTP client (nil: one with a 10 s timeout).
	Client *http.Client
	// Method is the Wait node's HTTP method (default POST).
	Method string
	// Header and Secret: the header auth the Wait node checks; empty
	// Secret: none is sent.
	Header string
	Secret string
	// Targets are the n8n instances a resume URL may point at: a stored
	// URL anywhere else is never called (the zero value: none is).
	Targets keystore.ResumeTargets
}

// ResumeOutcome is what one resume call found out.
type ResumeOutcome struct {
	Answer keystore.ResumeAnswer
	Status int    // n8n's HTTP status, 0 without an answer
	Detail string // for logs and the key's message; never the secret
}

// ResumeBody is what the guard sends to the waking execution: the Wait
// node's output item ($json.body in n8n).
type ResumeBody struct {
	ResumedBy string `json:"resumed_by"`
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	Attempt   int    `json:"attempt"`
}

// Resume calls r's resume URL once and classifies n8n's answer.
func (c *ResumeCaller) Resume(ctx context.Context, r *keystore.Record) ResumeOutcome {
	// target is r's resume URL, or its path at the private address the
	// operator gave for n8n's public one (keystore.ResumeTargets.Call).
	target, why := c.Targets.Call(r.ResumeURL)
	if why != "" {
		return ResumeOutcome{Answer: keystore.ResumeLost, Detail: "the guard does not call this resume URL: it " + why}
	}
	client := noRedirects(c.Client, 10*time.Second)
	method := c.Method
	if method == "" {
		method = http.MethodPost
	}
	body, _ := json.Marshal(ResumeBody{ResumedBy: "n8n-guard", Namespace: r.Namespace, Key: r.Key, Attempt: r.Attempt})
	req, err := newWebhookCall(ctx, method, target, body, cmp.Or(c.Header, ResumeDefaultHeader), c.Secret)
	if err != nil {
		return ResumeOutcome{Answer: keystore.ResumeLost, Detail: "the resume URL cannot be called: " + err.Error()}
	}
	resp, err := client.Do(req)
	if err != nil {
		var detail string
		if errors.Is(err, context.DeadlineExceeded) {
			detail = "n8n did not answer the resume call in time"
		} else {
			detail = "n8n could not be reached: " + resumeShortError(err)
		}
		return ResumeOutcome{Answer: keystore.ResumeRetry, Detail: detail}
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := resumeMessage(msg)
	out := ResumeOutcome{Status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		out.Answer, out.Detail = keystore.ResumeAccepted, fmt.Sprintf("n8n answered %d", resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound:
		out.Answer, out.Detail = keystore.ResumeLost, fmt.Sprintf("n8n answered 404 to the resume call: the execution was deleted or pruned (%s)", text)
	case resp.StatusCode == http.StatusConflict && strings.Contains(strings.ToLower(text), "running"):
		out.Answer, out.Detail = keystore.ResumeRetry, "n8n answered 409: the execution has not reached its Wait node yet"
	case resp.StatusCode == http.StatusConflict:
		out.Answer, out.Detail = keystore.ResumeLost, fmt.Sprintf("n8n answered 409 to the resume call: the execution finished or was cancelled (%s)", text)
	case resp.StatusCode == http.StatusInternalServerError && noResumeCredential(msg):
		// The execution's Wait node names no usable credential (it started
		// before `n8n setup` wired "n8n-guard resume", or the credential
		// was deleted): no call of the guard can ever wake it.
		out.Answer, out.Detail = keystore.ResumeLost, "n8n answered 500 \"No authentication data defined on node!\": the execution's Wait node has no resume credential (it started before n8n setup wired \"n8n-guard resume\", or the credential was deleted); the guard cannot wake it: resume or stop it in n8n, then resolve the key or let its source send it again"
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		out.Answer, out.Detail = keystore.ResumeRetry, fmt.Sprintf("n8n refused the resume credential (%d): check the Wait node's Header Auth credential and --resume-secret", resp.StatusCode)
	default:
		out.Answer, out.Detail = keystore.ResumeRetry, fmt.Sprintf("n8n answered %d to the resume call (%s)", resp.StatusCode, text)
	}
	return out
}

// noResumeCredential reports whether b is n8n's answer for a Wait node
// whose Header Auth credential cannot be read (n8n sends it as plain text
// or as {"message": ...}); nothing else of the body is looked at.
func noResumeCredential(b []byte) bool {
	const said = "No authentication data defined on node!"
	if strings.TrimSpace(string(b)) == said {
		return true
	}
	var m struct {
		Message string `json:"message"`
	}
	return json.Unmarshal(b, &m) == nil && strings.TrimSpace(m.Message) == said
}

// maxResumeMessage bounds what of an answer is kept: n8n's own error
// messages ("Execution with id 12 does not exist") are shorter.
const maxResumeMessage = 120

// resumeMessage is n8n's error message ({"code":409,"message":"..."}),
// at most maxResumeMessage bytes, or a note that the answer had none:
// nothing else of the target's body is kept (it would be stored in the
// key's message, for anyone who may look the key up).
func resumeMessage(b []byte) string {
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &m) != nil || strings.TrimSpace(m.Message) == "" {
		return "no n8n error message in the answer"
	}
	msg := strings.TrimSpace(m.Message)
	if len(msg) > maxResumeMessage {
		msg = strings.ToValidUTF8(msg[:maxResumeMessage], "") + "…"
	}
	return msg
}

// noRedirects is client (nil: a new one with timeout) that follows no
// redirect: the calls carry a secret, and a 3xx answer is the answer.
func noRedirects(client *http.Client, timeout time.Duration) *http.Client {
	c := &http.Client{Timeout: timeout}
	if client != nil {
		cp := *client
		c = &cp
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// resumeShortError drops the URL from a client error: it may hold the
// execution's signature.
func resumeShortError(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner.Error()
		}
	}
	return err.Error()
}

// newWebhookCall is a call of the guard to an n8n webhook (a Wait node's
// resume URL, a check): a JSON body and, with a secret, the header
// credential that the webhook's Header Auth checks.
func newWebhookCall(ctx context.Context, method, url string, body []byte, header, secret string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "n8n-guard")
	if secret != "" {
		req.Header.Set(header, secret)
	}
	return req, nil
}
