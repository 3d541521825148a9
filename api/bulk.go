package api

import (
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// bulkRequest is POST /v1/keys/resolve-bulk: one person's decision about
// every key a filter selects (keystore.BulkResolveRequest). A token
// limited to namespaces must name one in the filter (onKey checks it).
type bulkRequest struct {
	Filter     keystore.Filter `json:"filter"`
	Resolution keystore.State  `json:"resolution"`
	By         string          `json:"by"`
	Note       string          `json:"note"`
	ResultRef  string          `json:"result_ref"`
	Final      bool            `json:"final"`
	// Rerun, with resolution failed: the executions waiting at their keys'
	// re-run gates are re-run (keystore.BulkResolveRequest.Rerun).
	Rerun  bool `json:"rerun"`
	DryRun bool `json:"dry_run"`
	// ID names the action; a client that repeats a request (a timeout, a
	// double click) sends the id of its first answer and decides nothing new.
	ID string `json:"id"`
}

func (r bulkRequest) namespace() string { return strings.TrimSpace(r.Filter.Namespace) } // as Filter.Normalize reads it

func (s *Server) resolveBulk(c *fiber.Ctx, req bulkRequest) error {
	d, err := s.whoDecides(c, req.By) // auth.go: the token's person, or the body's by marked as not verified
	if err != nil {
		return err
	}
	req.By = d.By
	if req.Rerun && s.reruns == nil {
		return rerun.ErrOff
	}
	res, err := keystore.ResolveMany(c.UserContext(), s.store, keystore.BulkResolveRequest{
		Filter: req.Filter, Resolution: req.Resolution, By: req.By, Note: req.Note, ResultRef: req.ResultRef,
		Final: req.Final, Rerun: req.Rerun, DryRun: req.DryRun, ID: req.ID})
	if req.Rerun && !res.DryRun && res.Decided > 0 {
		s.reruns.Kick() // before an error too: what was granted stays granted
	}
	if err != nil && res.ID == "" {
		return err // refused: nothing changed
	}
	if err != nil {
		// Stopped part way (the store failed, the request ended): what was
		// decided stays decided, and the log says how far it went.
		s.log.Error("bulk decision stopped part way", "id", res.ID, "by", req.By, "token", tokenName(c.UserContext()),
			"matched", res.Matched, "decided", res.Decided, "err", err)
		return err
	}
	if res.Skipped == nil {
		res.Skipped = map[string]int{}
	}
	s.log.Info("bulk decision", "id", res.ID, "by", req.By, "token", tokenName(c.UserContext()), "resolution", req.Resolution,
		"dry_run", res.DryRun, "matched", res.Matched, "decided", res.Decided, "skipped", res.Skipped)
	return c.JSON(res)
}
