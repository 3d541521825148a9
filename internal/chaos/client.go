//go:build unix

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/linearize"
)

// answer is what the clients read of an answer: the outcome, the record's
// state and attempt, the token, and a problem's code.
type answer struct {
	Outcome string `json:"outcome"`
	State   string `json:"state"`
	Attempt int    `json:"attempt"`
	Token   string `json:"token"`
	Repeat  bool   `json:"repeat"`
	Code    string `json:"code"`
}

// caller calls guards over HTTP with one shared token.
type caller struct {
	http  *http.Client
	token string
}

func newCaller(token string, timeout time.Duration) *caller {
	return &caller{token: token, http: &http.Client{Timeout: timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}}
}

// do sends one call; the result is the model's Output and, when the call
// was accepted, its token. unexpected is set for an answer the protocol
// does not allow for these calls (a 400, a 401): the harness is wrong.
func (c *caller) do(ctx context.Context, base, ns string, in linearize.Input, held string) (out linearize.Output, token string, unexpected error) {
	var req *http.Request
	switch in.Kind {
	case linearize.Lookup:
		q := url.Values{"namespace": {ns}, "key": {in.Key}}
		req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/lookup?"+q.Encode(), nil)
	default:
		body := map[string]any{"namespace": ns, "key": in.Key}
		switch in.Kind {
		case linearize.Reserve:
			body["owner"], body["request_id"], body["lease_seconds"] = "checker "+in.ReqID, in.ReqID, in.Lease/int64(time.Second)
		case linearize.Complete:
			body["token"], body["result_ref"] = held, "effect-"+in.Key
		case linearize.Fail:
			body["token"], body["reason"], body["message"] = held, in.Reason, "checker"
		case linearize.Resolve:
			body["resolution"], body["by"], body["note"] = in.Resolution, "checker", "checked by the checker "+in.ReqID
		}
		raw, _ := json.Marshal(body)
		req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/"+string(in.Kind), bytes.NewReader(raw))
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.http.Do(req)
	if err != nil {
		return linearize.Output{Unknown: true}, "", nil
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return linearize.Output{Unknown: true}, "", nil
	}
	var a answer
	if json.Unmarshal(raw, &a) != nil {
		a = answer{}
	}
	switch {
	case res.StatusCode == http.StatusOK:
		if in.Kind == linearize.Lookup {
			a.Outcome = linearize.OutRecord
		}
		if a.Outcome == "" {
			return linearize.Output{Unknown: true}, "", fmt.Errorf("%s %s: 200 without an outcome: %s", in.Kind, in.Key, raw)
		}
		return linearize.Output{Outcome: a.Outcome, State: a.State, Attempt: a.Attempt, Repeat: a.Repeat}, a.Token, nil
	case res.StatusCode >= 500, res.StatusCode == http.StatusRequestTimeout, res.StatusCode == http.StatusTooManyRequests:
		// A fault: it may or may not have taken effect.
		return linearize.Output{Unknown: true}, "", nil
	}
	switch a.Code {
	case linearize.OutStale, linearize.OutConflict, linearize.OutNotFound:
		return linearize.Output{Outcome: a.Code}, "", nil
	}
	return linearize.Output{Unknown: true}, "", fmt.Errorf("%s %s: %d %s", in.Kind, in.Key, res.StatusCode, raw)
}
