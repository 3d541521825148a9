package api

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/wire"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// The request bodies and queries of the key routes: the wire's shapes
// only. Their rules are the domain's (keystore's request types state them
// once, and the store applies them once); decode.go refuses what is not
// even the right JSON type.

type reserveRequest struct {
	Namespace    string          `json:"namespace"`
	Key          keyString       `json:"key"`
	Owner        string          `json:"owner"`
	LeaseSeconds *int            `json:"lease_seconds"`
	Payload      json.RawMessage `json:"payload"`
	Fingerprint  string          `json:"fingerprint"`
	Destination  string          `json:"destination"`
	RequestID    string          `json:"request_id"`
	ResumeURL    string          `json:"resume_url"`
	RequestedBy  string          `json:"requested_by"`
	Summary      string          `json:"summary"`
	Rerun        bool            `json:"rerun"`
}

type completeRequest struct {
	Namespace string          `json:"namespace"`
	Key       keyString       `json:"key"`
	Token     string          `json:"token"`
	ResultRef string          `json:"result_ref"`
	Result    json.RawMessage `json:"result"`
	Via       keystore.Via    `json:"via"`
}

type failRequest struct {
	Namespace string          `json:"namespace"`
	Key       keyString       `json:"key"`
	Token     string          `json:"token"`
	Reason    keystore.Reason `json:"reason"`
	Retryable *bool           `json:"retryable"`
	Message   string          `json:"message"`
	ResumeURL string          `json:"resume_url"`
}

type resolveRequest struct {
	Namespace  string         `json:"namespace"`
	Key        keyString      `json:"key"`
	Resolution keystore.State `json:"resolution"`
	By         string         `json:"by"`
	Note       string         `json:"note"`
	ResultRef  string         `json:"result_ref"`
	Force      bool           `json:"force"`
	Rerun      bool           `json:"rerun"`
}

type lookupQuery struct {
	Namespace string
	Key       string
}

type listQuery struct {
	Namespace string
	State     keystore.State
	Limit     int
	Cursor    string
}

// Answer is the flat object every call on a key answers (the client
// reads it too, so it lives in api/wire).
type Answer = wire.Answer

// absentAnswer is the answer about a key that has no record: the lookup
// of a key never seen, or a reserve of a new key that the destination's
// breaker paused (nothing is recorded then).
type absentAnswer struct {
	Found             *bool            `json:"found,omitempty"`
	State             keystore.State   `json:"state"`
	Namespace         string           `json:"namespace"`
	Key               string           `json:"key"`
	Outcome           keystore.Outcome `json:"outcome"`
	Proceed           bool             `json:"proceed"`
	RetryAfterSeconds int              `json:"retry_after_seconds,omitempty"`
	PausedFor         string           `json:"paused_for,omitempty"`
}

func (r reserveRequest) namespace() string  { return r.Namespace }
func (r completeRequest) namespace() string { return r.Namespace }
func (r failRequest) namespace() string     { return r.Namespace }
func (r resolveRequest) namespace() string  { return r.Namespace }
func (q lookupQuery) namespace() string     { return q.Namespace }
func (q listQuery) namespace() string       { return q.Namespace }

type recordPage struct {
	Items      []*keystore.Record `json:"items"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

type destinationPage struct {
	Items []destination `json:"items"`
}

// destination is a breaker with how many of the destination's events are
// parked, waiting to be resumed, and how many n8n woke whose executions
// have not reserved again (keystore.Woken).
type destination struct {
	keystore.Breaker
	Parked int `json:"parked"`
	Woken  int `json:"woken"`
}

func (s *Server) reserve(c *fiber.Ctx, req reserveRequest) error {
	dr, err := req.domain()
	if err != nil {
		return err
	}
	if err := s.policies.Resume.Check(dr.ResumeURL); err != nil {
		return err
	}
	_, owner := keystore.ExecutionOf(dr.Owner)
	if err := s.policies.Resume.CheckExecution(dr.ResumeURL, keystore.RequestExecution(dr.RequestID), owner); err != nil {
		return err
	}
	dr.Principal = principalOf(c)
	res, err := s.store.Reserve(c.UserContext(), dr)
	if err != nil {
		return s.destinationRefused(c, req.Namespace, err)
	}
	s.metrics.reserved(req.Namespace, res.Outcome, res.Replayed)
	if res.Outcome == keystore.OutcomeRerunNotGranted {
		return rerunNotGranted(res.Record, dr.Rerun)
	}
	return s.writeResult(c, res, nil)
}

func (s *Server) complete(c *fiber.Ctx, req completeRequest) error {
	res, err := s.store.Complete(c.UserContext(), req.domain())
	if err != nil {
		return err
	}
	if !res.Replayed && res.Record != nil && res.Record.Via == keystore.ViaFallback {
		s.metrics.fallbackCompleted(req.Namespace)
	}
	return s.writeResult(c, res, nil)
}

func (s *Server) fail(c *fiber.Ctx, req failRequest) error {
	if err := s.policies.Resume.Check(req.ResumeURL); err != nil {
		return err
	}
	if err := s.failResumeExecution(c, req); err != nil {
		return err
	}
	res, err := s.store.Fail(c.UserContext(), req.domain())
	if err != nil {
		return s.destinationRefused(c, req.Namespace, err)
	}
	return s.writeResult(c, res, nil)
}

// failResumeExecution refuses a fail's resume URL that wakes another
// execution than the one holding the key's lease (its owner, as its
// reserve named it). A key without a record is left to the store, which
// refuses the fail itself; a new attempt reserved meanwhile has another
// token, so the fail that passed here is refused then as well.
func (s *Server) failResumeExecution(c *fiber.Ctx, req failRequest) error {
	if req.ResumeURL == "" {
		return nil
	}
	res, err := s.store.Lookup(c.UserContext(), req.Namespace, string(req.Key))
	if err != nil || res.Record == nil {
		return nil
	}
	_, holder := keystore.ExecutionOf(res.Record.Owner)
	return s.policies.Resume.CheckExecution(req.ResumeURL, holder)
}

func (s *Server) resolve(c *fiber.Ctx, req resolveRequest) error {
	d, err := s.whoDecides(c, req.By)
	if err != nil {
		return err
	}
	dr := req.domain()
	dr.By = d.By
	if dr.Rerun && s.reruns == nil {
		return rerun.ErrOff
	}
	res, err := s.store.Resolve(c.UserContext(), dr)
	if err != nil {
		return err
	}
	if dr.Rerun && !res.Replayed {
		s.reruns.Kick()
	}
	return s.writeResult(c, res, nil)
}

// The domain methods give each body to keystore as it is; the store
// applies the rules, once.

// domain refuses what only the wire can get wrong: lease_seconds 0 is not
// "the namespace's lease" (leave it out for that). Refused, the answer
// names the domain's broken fields too.
func (r reserveRequest) domain() (keystore.ReserveRequest, error) {
	dr := keystore.ReserveRequest{Namespace: r.Namespace, Key: string(r.Key), Owner: r.Owner, Payload: r.Payload,
		Fingerprint: r.Fingerprint, Destination: r.Destination, RequestID: r.RequestID, ResumeURL: r.ResumeURL, RequestedBy: r.RequestedBy,
		Summary: r.Summary, Rerun: r.Rerun}
	if r.LeaseSeconds == nil {
		return dr, nil
	}
	if *r.LeaseSeconds < 1 {
		_, _, err := dr.Normalize()
		return dr, withField(err, "lease_seconds", "min=1", "lease_seconds must be at least 1")
	}
	// Clamped past the limit, so a huge number cannot overflow into a
	// short lease: the domain's max rule refuses it.
	dr.Lease = time.Duration(min(*r.LeaseSeconds, keystore.MaxLeaseSeconds+1)) * time.Second
	return dr, nil
}

func (r completeRequest) domain() keystore.CompleteRequest {
	return keystore.CompleteRequest{Namespace: r.Namespace, Key: string(r.Key), Token: r.Token,
		ResultRef: r.ResultRef, Result: r.Result, Via: r.Via}
}

func (r failRequest) domain() keystore.FailRequest {
	return keystore.FailRequest{Namespace: r.Namespace, Key: string(r.Key), Token: r.Token,
		Reason: r.Reason, Retryable: r.Retryable, Message: r.Message, ResumeURL: r.ResumeURL}
}

func (r resolveRequest) domain() keystore.ResolveRequest {
	return keystore.ResolveRequest{Namespace: r.Namespace, Key: string(r.Key), Resolution: r.Resolution,
		By: r.By, Note: r.Note, ResultRef: r.ResultRef, Force: r.Force, Rerun: r.Rerun}
}

func (s *Server) lookup(c *fiber.Ctx, q lookupQuery) error {
	res, err := s.store.Lookup(c.UserContext(), q.Namespace, q.Key)
	if err != nil {
		return err
	}
	found := res.Record != nil
	return s.writeResult(c, res, &found)
}

func (s *Server) listKeys(c *fiber.Ctx, q listQuery) error {
	page, err := s.store.List(c.UserContext(), keystore.ListQuery{
		Namespace: q.Namespace, State: q.State, Limit: q.Limit, Cursor: q.Cursor,
	})
	if err != nil {
		return err
	}
	if page.Items == nil {
		page.Items = []*keystore.Record{}
	}
	return writeJSON(c, recordPage{Items: page.Items, NextCursor: page.NextCursor})
}

func (s *Server) destinations(c *fiber.Ctx) error {
	all, err := s.store.Destinations(c.UserContext())
	if err != nil {
		return err
	}
	var parked, woken map[string]int
	if parked, err = s.store.ParkedCounts(c.UserContext()); err != nil {
		return err
	}
	if woken, err = s.store.WokenCounts(c.UserContext()); err != nil {
		return err
	}
	p, _ := access.From(c.UserContext())
	items := []destination{}
	for _, b := range all {
		if p.MayUseBreaker(b.Destination) {
			b.Views = visibleViews(p, b.Views)
			items = append(items, destination{Breaker: b, Parked: parked[b.Destination], Woken: woken[b.Destination]})
		}
	}
	return writeJSON(c, destinationPage{Items: items})
}

// visibleViews are the namespaces' own breakers p may see: a token
// limited to namespaces learns of its own only, never another team's
// namespace.
func visibleViews(p access.Principal, vs []keystore.BreakerView) []keystore.BreakerView {
	var out []keystore.BreakerView
	for _, v := range vs {
		if p.MayUse(v.Namespace) {
			out = append(out, v)
		}
	}
	return out
}

// withField adds one broken field to the domain's answer about the rest of
// the request (nil: the rest was fine), so one answer names every field.
func withField(err error, field, rule, msg string) error {
	out := &errs.Error{Code: errs.InvalidRequest, Message: msg, Fields: []errs.FieldError{{Field: field, Rule: rule}}}
	var e *errs.Error
	if errors.As(err, &e) {
		out.Code = e.Code
		out.Message = e.Message + "; " + msg
		out.Fields = append(append([]errs.FieldError(nil), e.Fields...), out.Fields...)
	} else if err != nil {
		return err
	}
	return out
}

// principalOf is what the store seals with a request_id: the token that sent
// the reserve, so only it gets the token back on a repeat.
func principalOf(c *fiber.Ctx) string {
	if p, ok := access.From(c.UserContext()); ok {
		return p.Identity()
	}
	return ""
}

// writeResult answers a call on a key with the flat object of the
// contract.
func (s *Server) writeResult(c *fiber.Ctx, res keystore.Result, found *bool) error {
	retry := 0
	if res.RetryAfter > 0 {
		retry = keystore.CeilSeconds(res.RetryAfter)
	}
	if res.Replayed {
		c.Set("Idempotent-Replayed", "true")
	}
	if res.Outcome == keystore.OutcomeDestinationPaused && retry > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retry))
	}
	if res.Record == nil {
		return writeJSON(c, absentAnswer{Found: found, State: keystore.StateAbsent, Namespace: res.Namespace, Key: res.Key,
			Outcome: res.Outcome, Proceed: res.Proceed, RetryAfterSeconds: retry, PausedFor: res.PausedFor})
	}
	var resumeAt *time.Time
	awaiting := res.Outcome == keystore.OutcomeParked && res.Record.Reason == keystore.ReasonAwaitingApproval
	if res.Outcome == keystore.OutcomeParked && !awaiting {
		at := time.Now().UTC().Add(time.Duration(retry) * time.Second).Truncate(time.Second)
		resumeAt = &at
	}
	return writeJSON(c, Answer{Found: found, Outcome: res.Outcome, Proceed: res.Proceed, Token: res.Token,
		Repeat: res.Outcome == keystore.OutcomeAccepted && res.Replayed, RetryAfterSeconds: retry,
		ExpectedResumeAt: resumeAt, AwaitingApproval: awaiting, PausedFor: res.PausedFor, Record: res.Record})
}

// decode reads the JSON body into req and validates it.
func (s *Server) decode(c *fiber.Ctx, req any) error {
	if err := decodeJSON(c.Body(), req); err != nil {
		return err
	}
	return s.check(req)
}

func writeJSON(c *fiber.Ctx, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(body)
}

// query returns a query parameter as a string the request may outlive
// (fiber's strings point into buffers it reuses).
func query(c *fiber.Ctx, name string) string {
	return strings.Clone(c.Query(name))
}

func queryInt(c *fiber.Ctx, name string) (int, error) {
	v := c.Query(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, &errs.Error{Code: errs.InvalidRequest, Message: name + " must be an integer",
			Fields: []errs.FieldError{{Field: name, Rule: "type=integer"}}}
	}
	return n, nil
}

// rerunNotGranted is the answer to a re-run gate whose key no person
// allowed a re-run of: a problem, so the gate's node fails and its
// execution stops there (keystore/rerun.go). It says why the key failed.
// Any other reserve of a key at its gate (the gated execution run again
// from its start, a copy) is refused too, naming the execution that waits.
func rerunNotGranted(r *keystore.Record, gate bool) error {
	why := string(r.Reason)
	if r.Message != "" {
		why += ": " + r.Message
	}
	if !gate {
		return errs.Errorf(errs.RerunNotGranted, "attempt %d of key %q failed (%s) and its execution %s waits at its re-run gate: no reserve writes the key until a person allows a retry (with or without re-run) in the guard's console; nothing was written",
			r.Attempt, r.Key, why, keystore.RerunHolder(r))
	}
	return errs.Errorf(errs.RerunNotGranted, "attempt %d of key %q failed (%s); the execution stops at its re-run gate until a person allows a retry with re-run in the guard's console (it then reserves the key again and writes once)",
		r.Attempt, r.Key, why)
}
