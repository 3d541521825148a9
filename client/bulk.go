package client

import (
	"context"
	"net/http"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// BulkDecision is one person's decision about every key a filter selects
// (POST /v1/keys/resolve-bulk).
type BulkDecision struct {
	Filter     keystore.Filter
	Resolution keystore.State
	By, Note   string
	ResultRef  string
	Final      bool
	DryRun     bool
	// ID repeats an earlier decision (a dry run's, an answer that was lost):
	// what it decided is not decided again.
	ID string
}

// ResolveBulk decides (or, DryRun, counts) every key d.Filter selects.
func (c *Client) ResolveBulk(ctx context.Context, d BulkDecision) (keystore.BulkResult, error) {
	type filter struct {
		Namespace   string           `json:"namespace,omitempty"`
		Destination string           `json:"destination,omitempty"`
		States      []keystore.State `json:"states,omitempty"`
		Reason      keystore.Reason  `json:"reason,omitempty"`
		Holder      string           `json:"holder,omitempty"`
		KeyPrefix   string           `json:"key_prefix,omitempty"`
		Text        string           `json:"text,omitempty"`
		From        *time.Time       `json:"from,omitempty"`
		To          *time.Time       `json:"to,omitempty"`
	}
	f := d.Filter
	body := struct {
		Filter     filter         `json:"filter"`
		Resolution keystore.State `json:"resolution"`
		By         string         `json:"by"`
		Note       string         `json:"note"`
		ResultRef  string         `json:"result_ref,omitempty"`
		Final      bool           `json:"final,omitempty"`
		DryRun     bool           `json:"dry_run,omitempty"`
		ID         string         `json:"id,omitempty"`
	}{Filter: filter{Namespace: f.Namespace, Destination: f.Destination, States: f.States, Reason: f.Reason, Holder: f.Holder,
		KeyPrefix: f.KeyPrefix, Text: f.Text, From: timeOrNil(f.From), To: timeOrNil(f.To)},
		Resolution: d.Resolution, By: d.By, Note: d.Note, ResultRef: d.ResultRef, Final: d.Final, DryRun: d.DryRun, ID: d.ID}
	var res keystore.BulkResult
	err := c.Do(ctx, http.MethodPost, "/v1/keys/resolve-bulk", body, &res)
	return res, err
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
