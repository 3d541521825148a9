package api

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The request bodies of the key routes. Tags state the contract's input
// rules; the key and namespace rules are keystore's own (see decode.go).

type reserveRequest struct {
	Namespace    string          `json:"namespace" validate:"namespace"`
	Key          keyString       `json:"key" validate:"idem_key"`
	Owner        string          `json:"owner" validate:"max=128"`
	LeaseSeconds *int            `json:"lease_seconds" validate:"omitnil,min=1,max=86400"`
	Payload      json.RawMessage `json:"payload"`
	Fingerprint  string          `json:"fingerprint" validate:"max=128"`
	Destination  string          `json:"destination" validate:"omitempty,namespace"`
	RequestID    string          `json:"request_id" validate:"max=128"`
	ResumeURL    string          `json:"resume_url" validate:"max=2048"`
}

type completeRequest struct {
	Namespace string          `json:"namespace" validate:"namespace"`
	Key       keyString       `json:"key" validate:"idem_key"`
	Token     string          `json:"token" validate:"required,max=256"`
	ResultRef string          `json:"result_ref" validate:"max=512"`
	Result    json.RawMessage `json:"result"`
	Via       keystore.Via    `json:"via" validate:"omitempty,oneof=primary fallback"`
}

type failRequest struct {
	Namespace string          `json:"namespace" validate:"namespace"`
	Key       keyString       `json:"key" validate:"idem_key"`
	Token     string          `json:"token" validate:"required,max=256"`
	Reason    keystore.Reason `json:"reason" validate:"required,oneof=destination_unreachable destination_failed validation_failed outcome_unknown"`
	Retryable *bool           `json:"retryable"`
	Message   string          `json:"message" validate:"max=2000"`
	ResumeURL string          `json:"resume_url" validate:"max=2048"`
}

type resolveRequest struct {
	Namespace  string         `json:"namespace" validate:"namespace"`
	Key        keyString      `json:"key" validate:"idem_key"`
	Resolution keystore.State `json:"resolution" validate:"required,oneof=completed failed"`
	By         string         `json:"by" validate:"required,max=128"`
	Note       string         `json:"note" validate:"required,max=2000"`
	ResultRef  string         `json:"result_ref" validate:"max=512"`
	Force      bool           `json:"force"`
}

type lookupQuery struct {
	Namespace string `query:"namespace" validate:"namespace"`
	Key       string `query:"key" validate:"idem_key"`
}

type listQuery struct {
	Namespace string         `query:"namespace" validate:"omitempty,namespace"`
	State     keystore.State `query:"state" validate:"omitempty,oneof=reserved completed failed unknown parked"`
	Limit     int            `query:"limit" validate:"min=0,max=1000"`
	Cursor    string         `query:"cursor" validate:"max=1024"`
}

// Answer is the flat object every call on a key answers: the outcome and
// the key's record at the top level of one object.
type Answer struct {
	Found   *bool            `json:"found,omitempty"`
	Outcome keystore.Outcome `json:"outcome"`
	Proceed bool             `json:"proceed"`
	Token   string           `json:"token,omitempty"`
	// Repeat marks an accepted answer given again to a repeated reserve
	// (same request_id, lease live): the same token, nothing new recorded.
	Repeat            bool `json:"repeat,omitempty"`
	RetryAfterSeconds int  `json:"retry_after_seconds,omitempty"`
	// ExpectedResumeAt, with outcome parked: when the guard expects to
	// resume the execution (the end of the destination's cooldown).
	ExpectedResumeAt *time.Time `json:"expected_resume_at,omitempty"`
	*keystore.Record
}

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
}

type recordPage struct {
	Items      []*keystore.Record `json:"items"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

type destinationPage struct {
	Items []keystore.Breaker `json:"items"`
}

func (s *Server) reserve(c *fiber.Ctx) error {
	var req reserveRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if err := s.allowNamespace(c, req.Namespace); err != nil {
		return err
	}
	var lease time.Duration
	if req.LeaseSeconds != nil {
		lease = time.Duration(*req.LeaseSeconds) * time.Second
	}
	res, err := s.store.Reserve(c.UserContext(), keystore.ReserveRequest{
		Namespace:   req.Namespace,
		Key:         string(req.Key),
		Owner:       req.Owner,
		Lease:       lease,
		Payload:     req.Payload,
		Fingerprint: req.Fingerprint,
		Destination: req.Destination,
		RequestID:   req.RequestID,
		ResumeURL:   req.ResumeURL,
	})
	if err != nil {
		return err
	}
	s.metrics.reserved(req.Namespace, res.Outcome, res.Replayed)
	return s.writeResult(c, res, nil)
}

func (s *Server) complete(c *fiber.Ctx) error {
	var req completeRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if err := s.allowNamespace(c, req.Namespace); err != nil {
		return err
	}
	res, err := s.store.Complete(c.UserContext(), keystore.CompleteRequest{
		Namespace: req.Namespace,
		Key:       string(req.Key),
		Token:     req.Token,
		ResultRef: req.ResultRef,
		Result:    req.Result,
		Via:       req.Via,
	})
	if err != nil {
		return err
	}
	if !res.Replayed && res.Record != nil && res.Record.Via == keystore.ViaFallback {
		s.metrics.fallbackCompleted(req.Namespace)
	}
	return s.writeResult(c, res, nil)
}

func (s *Server) fail(c *fiber.Ctx) error {
	var req failRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if err := s.allowNamespace(c, req.Namespace); err != nil {
		return err
	}
	res, err := s.store.Fail(c.UserContext(), keystore.FailRequest{
		Namespace: req.Namespace,
		Key:       string(req.Key),
		Token:     req.Token,
		Reason:    req.Reason,
		Retryable: req.Retryable,
		Message:   req.Message,
		ResumeURL: req.ResumeURL,
	})
	if err != nil {
		return err
	}
	return s.writeResult(c, res, nil)
}

func (s *Server) resolve(c *fiber.Ctx) error {
	var req resolveRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if err := s.allowNamespace(c, req.Namespace); err != nil {
		return err
	}
	res, err := s.store.Resolve(c.UserContext(), keystore.ResolveRequest{
		Namespace:  req.Namespace,
		Key:        string(req.Key),
		Resolution: req.Resolution,
		By:         req.By,
		Note:       req.Note,
		ResultRef:  req.ResultRef,
		Force:      req.Force,
	})
	if err != nil {
		return err
	}
	return s.writeResult(c, res, nil)
}

func (s *Server) lookup(c *fiber.Ctx) error {
	q := lookupQuery{Namespace: query(c, "namespace"), Key: query(c, "key")}
	if err := s.check(&q); err != nil {
		return err
	}
	if err := s.allowNamespace(c, q.Namespace); err != nil {
		return err
	}
	res, err := s.store.Lookup(c.UserContext(), q.Namespace, q.Key)
	if err != nil {
		return err
	}
	found := res.Record != nil
	return s.writeResult(c, res, &found)
}

func (s *Server) listKeys(c *fiber.Ctx) error {
	q := listQuery{Namespace: query(c, "namespace"), State: keystore.State(query(c, "state")), Cursor: query(c, "cursor")}
	var err error
	if q.Limit, err = queryInt(c, "limit"); err != nil {
		return err
	}
	if err := s.check(&q); err != nil {
		return err
	}
	if err := s.allowNamespace(c, q.Namespace); err != nil {
		return err
	}
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
	items, err := s.store.Destinations(c.UserContext())
	if err != nil {
		return err
	}
	if items == nil {
		items = []keystore.Breaker{}
	}
	return writeJSON(c, destinationPage{Items: items})
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
			Outcome: res.Outcome, Proceed: res.Proceed, RetryAfterSeconds: retry})
	}
	var resumeAt *time.Time
	if res.Outcome == keystore.OutcomeParked {
		at := time.Now().UTC().Add(time.Duration(retry) * time.Second).Truncate(time.Second)
		resumeAt = &at
	}
	return writeJSON(c, Answer{Found: found, Outcome: res.Outcome, Proceed: res.Proceed, Token: res.Token,
		Repeat: res.Outcome == keystore.OutcomeAccepted && res.Replayed, RetryAfterSeconds: retry,
		ExpectedResumeAt: resumeAt, Record: res.Record})
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
		return 0, &keystore.Error{Code: keystore.EInvalidRequest, Message: name + " must be an integer",
			Fields: []keystore.FieldError{{Field: name, Rule: "type=integer"}}}
	}
	return n, nil
}
