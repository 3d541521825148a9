// Package slacktest is the one fake Slack of the tests: Server stands in
// for the Web API (and misbehaves like it), Sign signs requests the way
// Slack signs its interactivity requests to the guard. It is a test aid:
// nothing in the service imports it.
package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"
)

// Sign returns the headers Slack sends with body at ts: X-Slack-Signature
// is "v0=" + hex(HMAC-SHA256(secret, "v0:<ts>:<body>")).
func Sign(secret string, ts time.Time, body []byte) http.Header {
	stamp := fmt.Sprint(ts.Unix())
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + stamp + ":"))
	mac.Write(body)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	h.Set("X-Slack-Request-Timestamp", stamp)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}
