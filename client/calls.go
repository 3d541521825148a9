package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/n8n-guard/n8n-guard/api/wire"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// Health is GET /healthz's answer.
type Health struct {
	Status  string `json:"status"`
	Version string `json:"version"`
}

// Health asks whether the server runs, and which version.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.Do(ctx, http.MethodGet, "/healthz", nil, &h)
	return h, err
}

// KeyQuery narrows GET /v1/keys.
type KeyQuery struct {
	Namespace string
	State     keystore.State
	Limit     int // 0: the server's default
	Cursor    string
}

// KeyPage is one page of GET /v1/keys.
type KeyPage struct {
	Items      []*keystore.Record `json:"items"`
	NextCursor string             `json:"next_cursor"`
}

// Keys lists one page of keys.
func (c *Client) Keys(ctx context.Context, q KeyQuery) (KeyPage, error) {
	v := url.Values{}
	for k, s := range map[string]string{"namespace": q.Namespace, "state": string(q.State), "cursor": q.Cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var page KeyPage
	err := c.Do(ctx, http.MethodGet, "/v1/keys?"+v.Encode(), nil, &page)
	return page, err
}

// Lookup answers a key's record as the server sent it: a record with its
// history, or {"found": false, …} for a key never seen.
func (c *Client) Lookup(ctx context.Context, namespace, key string) (json.RawMessage, error) {
	var raw json.RawMessage
	q := url.Values{"namespace": {namespace}, "key": {key}}
	err := c.Do(ctx, http.MethodGet, "/v1/lookup?"+q.Encode(), nil, &raw)
	return raw, err
}

// Resolution is a person's decision about a key (POST /v1/resolve).
type Resolution struct {
	Namespace  string         `json:"namespace"`
	Key        string         `json:"key"`
	Resolution keystore.State `json:"resolution"`
	By         string         `json:"by,omitempty"` // "" with a named token: its person
	Note       string         `json:"note"`
	ResultRef  string         `json:"result_ref,omitempty"`
	Force      bool           `json:"force"`
}

// Resolve records a person's decision about a key.
func (c *Client) Resolve(ctx context.Context, r Resolution) (wire.Answer, error) {
	var a wire.Answer
	if err := c.Do(ctx, http.MethodPost, "/v1/resolve", r, &a); err != nil {
		return a, err
	}
	if a.Record == nil {
		return a, fmt.Errorf("POST /v1/resolve answered without the key's record: is %s n8n-guard?", c.base)
	}
	return a, nil
}

// Notifications lists the outbox, newest first; state "" lists all.
func (c *Client) Notifications(ctx context.Context, state string, limit int) (notify.Page, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if state != "" {
		q.Set("state", state)
	}
	var page notify.Page
	err := c.Do(ctx, http.MethodGet, "/v1/notifications?"+q.Encode(), nil, &page)
	return page, err
}

// Resend queues a dead notification again.
func (c *Client) Resend(ctx context.Context, id string) (notify.Notification, error) {
	var n notify.Notification
	err := c.Do(ctx, http.MethodPost, "/v1/notifications/resend", map[string]string{"id": id}, &n)
	return n, err
}

// Backup copies GET /v1/admin/backup to w. The answer's Content-Length is
// the snapshot's size: a body that ends early is an error here, not a
// short file.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var late *time.Timer
	if c.timeout > 0 {
		late = time.AfterFunc(c.timeout, cancel)
	}
	resp, err := c.send(ctx, c.stream, http.MethodGet, wire.BackupPath, nil)
	if late != nil && !late.Stop() {
		if err == nil {
			resp.Body.Close()
		}
		return 0, fmt.Errorf("n8n-guard at %s: %w: no answer within %s", c.base, ErrUnreachable, c.timeout)
	}
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
		return 0, answerError(http.MethodGet, wire.BackupPath, resp.StatusCode, raw)
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("the server sent %d of %d bytes", n, resp.ContentLength)
	}
	if err != nil {
		return n, fmt.Errorf("copy from %s: %w", c.base, err)
	}
	return n, nil
}

// Destination is one item of GET /v1/destinations: a breaker, its
// maintenance window if any, and how many of its events are parked.
type Destination struct {
	keystore.Breaker
	Parked int `json:"parked"`
}

// Destinations lists every destination's breaker.
func (c *Client) Destinations(ctx context.Context) ([]Destination, error) {
	var page struct {
		Items []Destination `json:"items"`
	}
	err := c.Do(ctx, http.MethodGet, "/v1/destinations", nil, &page)
	return page.Items, err
}

// Hold is a maintenance window (POST /v1/destinations/hold).
type Hold struct {
	Destination string    `json:"destination"`
	By          string    `json:"by,omitempty"`
	Reason      string    `json:"reason"`
	Until       time.Time `json:"until"`
}

// HoldDestination pauses a destination until h.Until: events with a resume
// URL park meanwhile and catch up after it.
func (c *Client) HoldDestination(ctx context.Context, h Hold) (keystore.Breaker, error) {
	var b keystore.Breaker
	err := c.Do(ctx, http.MethodPost, "/v1/destinations/hold", h, &b)
	return b, err
}

// Approval is a person's approval or rejection of a key that awaits one
// (POST /v1/approve, /v1/reject); By may be left out with a named token.
type Approval struct {
	Namespace string `json:"namespace"`
	Key       string `json:"key"`
	By        string `json:"by,omitempty"`
	Note      string `json:"note,omitempty"`
}

// Approve approves a key, or rejects it when reject is true.
func (c *Client) Approve(ctx context.Context, a Approval, reject bool) (wire.Answer, error) {
	path := "/v1/approve"
	if reject {
		path = "/v1/reject"
	}
	var out wire.Answer
	if err := c.Do(ctx, http.MethodPost, path, a, &out); err != nil {
		return out, err
	}
	if out.Record == nil {
		return out, fmt.Errorf("POST %s answered without the key's record: is %s n8n-guard?", path, c.base)
	}
	return out, nil
}

// ResetBreaker closes a destination's breaker now, for reason
// (POST /v1/destinations/reset); by may be "" with a named token.
func (c *Client) ResetBreaker(ctx context.Context, destination, by, reason string) (keystore.Breaker, error) {
	var b keystore.Breaker
	body := map[string]string{"destination": destination, "reason": reason}
	if by != "" {
		body["by"] = by
	}
	err := c.Do(ctx, http.MethodPost, "/v1/destinations/reset", body, &b)
	return b, err
}

// EndHold ends a destination's maintenance window now
// (POST /v1/destinations/hold/end).
func (c *Client) EndHold(ctx context.Context, destination, by, reason string) (keystore.Breaker, error) {
	var b keystore.Breaker
	body := map[string]string{"destination": destination, "reason": reason}
	if by != "" {
		body["by"] = by
	}
	err := c.Do(ctx, http.MethodPost, "/v1/destinations/hold/end", body, &b)
	return b, err
}
