package slacktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
)

// post calls a Web API method as slack-go does: a form, the token in the
// header.
func post(t *testing.T, ctx context.Context, s *slacktest.Server, token, method string, form url.Values) (*http.Response, map[string]any, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.APIURL()+method, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	return res, body, nil
}

func TestTheFakeAnswersLikeSlack(t *testing.T) {
	s := slacktest.New(t)
	ctx := context.Background()
	msg := url.Values{"channel": {"C0OPS"}, "text": {"a failure"}, "blocks": {`[{"type":"section","text":{"type":"mrkdwn","text":"\u003c@U0ANA\u003e"}}]`}}

	_, body, err := post(t, ctx, s, slacktest.Token, "chat.postMessage", msg)
	if err != nil || body["ok"] != true || body["ts"] == "" {
		t.Fatalf("a post: %v %v", body, err)
	}
	ts := body["ts"].(string)
	if _, body, _ = post(t, ctx, s, slacktest.Token, "chat.update", url.Values{"channel": {"C0OPS"}, "ts": {ts}, "text": {"fixed"}}); body["ts"] != ts {
		t.Fatalf("an update answered %v, want the message's ts %s", body, ts)
	}
	if got := s.Messages(); len(got) != 2 || got[0].Method != "chat.postMessage" || got[1].Method != "chat.update" || !strings.Contains(got[0].Shown(), "<@U0ANA>") {
		t.Fatalf("the channel shows %+v", got)
	}
	if h := s.History("C0OPS"); len(h) != 1 || h[0]["ts"] != ts {
		t.Fatalf("history %v", h)
	}

	if _, body, _ = post(t, ctx, s, "xoxb-other", "chat.postMessage", msg); body["error"] != "invalid_auth" {
		t.Fatalf("another token: %v", body)
	}

	s.SetRetryAfter(7)
	s.Script("429", "5xx")
	if res, body, _ := post(t, ctx, s, slacktest.Token, "chat.postMessage", msg); res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "7" || body["error"] != "ratelimited" {
		t.Fatalf("429: %d %q %v", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if res, _, _ := post(t, ctx, s, slacktest.Token, "chat.postMessage", msg); res.StatusCode != http.StatusServiceUnavailable || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("5xx: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}

	s.FailChannel("C0OPS", "channel_not_found")
	if _, body, _ = post(t, ctx, s, slacktest.Token, "chat.postMessage", msg); body["error"] != "channel_not_found" {
		t.Fatalf("a failed channel: %v", body)
	}
	s.FailChannel("C0OPS", "")

	s.SetMode("timeout")
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, _, err := post(t, short, s, slacktest.Token, "chat.postMessage", msg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timeout: %v, want the client to give up", err)
	}
	s.SetMode("ok")

	if got := len(s.CallsOf("chat.postMessage", "C0OPS")); got != 6 {
		t.Fatalf("%d posts to C0OPS recorded, want 6 (answered or refused)", got)
	}
	if last := s.Last("chat.postMessage"); last.Answer != "timeout" {
		t.Fatalf("the last post was answered %q, want timeout", last.Answer)
	}

	s.Off()
	if _, _, err := post(t, ctx, s, slacktest.Token, "chat.postMessage", msg); err == nil {
		t.Fatal("Off: the call was answered")
	}
	s.On()
	if _, body, err := post(t, ctx, s, slacktest.Token, "chat.postMessage", msg); err != nil || body["ok"] != true {
		t.Fatalf("On: %v %v", body, err)
	}
}
