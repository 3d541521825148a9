package keystore

import (
	"encoding/json"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/internal/redact"
)

// ReserveRequest asks to start an attempt for one event.
type ReserveRequest struct {
	Namespace   string          `json:"namespace" validate:"namespace"`
	Key         string          `json:"key"` // NormalizeKey
	Owner       string          `json:"owner" validate:"max=128,utf8,no_control"`
	Lease       time.Duration   `json:"lease_seconds" validate:"min=0,max_seconds=86400"` // zero: the namespace's lease
	Payload     json.RawMessage `json:"payload"`
	Fingerprint string          `json:"fingerprint" validate:"max=128,utf8,no_control"`
	Destination string          `json:"destination" validate:"omitempty,namespace"`
	// RequestID identifies the attempt's request (n8n: execution id and
	// node name). Repeated while its lease is live by the same Principal,
	// the reserve answers accepted again with the same token
	// (DecideReserve).
	RequestID string `json:"request_id" validate:"max=128,utf8,no_control"`
	// Principal is who sent the reserve (the API token's identity). It is
	// sealed with the request_id: the same request_id from anyone else is
	// an ordinary second copy and never gets the token back. Empty: a
	// caller without one (the store's own tests, tools).
	Principal string `json:"-"`
	// ResumeURL, when the destination is paused, parks the key instead of
	// answering destination_paused (park.go).
	ResumeURL string `json:"resume_url" validate:"omitempty,max=2048,utf8,no_control,http_url"`
	// RequestedBy is who triggered the event, where known (a form's
	// submitter, a ticket's author). In a namespace that requires approval
	// with four eyes, that person may not approve it (approval.go). It is
	// recorded as NormalizePerson spells it (person.go).
	RequestedBy string `json:"requested_by" validate:"max=128,utf8,no_control,no_format,one_script"`
	// Summary says in one line what the event is ("Invoice 4711 · 12,000
	// EUR · ACME"), so an approver has something to judge. Trimmed and
	// redacted like other free text; recorded on the key (Record.Summary).
	Summary string `json:"summary" validate:"max=200,utf8,no_control,one_line"`
	// Rerun marks the reserve of a re-run gate (rerun.go): a failed key
	// that no person allowed a re-run of answers rerun_not_granted.
	Rerun bool `json:"rerun"`
}

// CompleteRequest reports that the attempt holding Token took effect.
type CompleteRequest struct {
	Namespace string          `json:"namespace" validate:"namespace"`
	Key       string          `json:"key"` // NormalizeKey
	Token     string          `json:"token" validate:"required,max=256"`
	ResultRef string          `json:"result_ref" validate:"max=512,utf8,no_control"`
	Result    json.RawMessage `json:"result" validate:"max_bytes=16384"`               // a JSON object
	Via       Via             `json:"via" validate:"omitempty,oneof=primary fallback"` // empty: primary
}

// FailRequest reports that the attempt holding Token did not take effect,
// or that nobody knows (outcome_unknown).
type FailRequest struct {
	Namespace string `json:"namespace" validate:"namespace"`
	Key       string `json:"key"` // NormalizeKey
	Token     string `json:"token" validate:"required,max=256"`
	Reason    Reason `json:"reason" validate:"required,oneof=destination_unreachable destination_failed validation_failed outcome_unknown"`
	Retryable *bool  `json:"retryable"` // nil: the reason's default
	Message   string `json:"message" validate:"max=2000,utf8"`
	// ResumeURL parks the key when the failure leaves the destination's
	// breaker open (park.go).
	ResumeURL string `json:"resume_url" validate:"omitempty,max=2048,utf8,no_control,http_url"`
}

// ResolveRequest is a person's decision about a key.
type ResolveRequest struct {
	Namespace  string `json:"namespace" validate:"namespace"`
	Key        string `json:"key"` // NormalizeKey
	Resolution State  `json:"resolution" validate:"required,oneof=completed failed"`
	By         string `json:"by" validate:"required,max=128,utf8,no_control,no_format"` // trimmed first
	Note       string `json:"note" validate:"required,max=2000,utf8"`                   // trimmed first
	ResultRef  string `json:"result_ref" validate:"max=512,utf8,no_control"`
	Force      bool   `json:"force"`
	// Final, with resolution failed: no new attempt may start (the key
	// answers rejected), instead of the default retryable.
	Final bool `json:"final"`
	// Rerun, with resolution failed: a person allows the key's execution,
	// which waits at its re-run gate, to be re-run (rerun.go).
	Rerun bool `json:"rerun"`
	// Bulk names the bulk action this decision is part of (filter.go);
	// the history entry says so.
	Bulk string `json:"-"`
	// Attempt, when not 0, is the attempt the person looked at: a key at
	// another attempt by now is not decided (conflict). Slack's buttons
	// set it, so an old message never decides a new attempt.
	Attempt int `json:"-"`
}

// ListQuery selects a page of records.
type ListQuery struct {
	Namespace string `json:"namespace" validate:"omitempty,namespace"`                                  // empty: all namespaces
	State     State  `json:"state" validate:"omitempty,oneof=reserved completed failed unknown parked"` // empty: all states
	// KeyPrefix selects keys that begin with it; it needs Namespace.
	KeyPrefix string `json:"key" validate:"max_bytes=255,utf8"`
	// Owner selects keys whose last attempt's lease holder is exactly it:
	// the failed and unknown keys (the ones a person acts on), or with
	// State reserved the attempts in flight. Completed keys are not
	// searched by owner.
	Owner string `json:"owner" validate:"max=128"`
	// Oldest lists unknown keys by the time they went unknown, oldest
	// first: the queue a person works through. It needs State unknown.
	Oldest bool   `json:"oldest"`
	Limit  int    `json:"limit" validate:"min=0,max=1000"` // zero: 100
	Cursor string `json:"cursor" validate:"max=1024"`
}

// Page is one page of a listing.
type Page struct {
	Items      []*Record
	NextCursor string
}

// The Normalize methods apply the contract's input rules: the tags above,
// run once by the validator (rules.go), the key rule (NormalizeKey, once),
// and the rules that span fields. Every broken field is reported in one
// error. Every backend calls them first, so a store refuses bad input
// even without the API.

// CheckIdentity checks a namespace and returns the normalized key.
func CheckIdentity(ns, key string) (string, error) {
	var v violations
	v.add(CheckNamespace("namespace", ns))
	key = v.key(key)
	return key, v.err()
}

func (r ReserveRequest) Normalize() (ReserveRequest, Fingerprint, error) {
	var v violations
	r.Key = v.key(r.Key)
	r.RequestedBy = NormalizePerson(r.RequestedBy)
	r.Summary = strings.TrimSpace(r.Summary)
	v.check(r)
	// A summary is built from the item: it may carry a customer's e-mail.
	// A bidi embedding, override or isolate (from an item's text) would
	// reorder what the approvers read after it: dropped, not refused, so
	// a customer's name never costs the write. Masking may lengthen the
	// text ("a@b.de" is "[email]"): cut to the limit.
	r.Summary = cutRunes(redact.Redact(strings.Map(dropBidi, r.Summary)), MaxSummaryLength)
	hasPayload := len(r.Payload) > 0 && strings.TrimSpace(string(r.Payload)) != "null"
	if len(r.Payload) > 0 && r.Fingerprint != "" {
		v.field("fingerprint", "excluded_with=payload", "send either payload or fingerprint, not both")
	}
	if err := v.err(); err != nil {
		return r, nil, err
	}
	var (
		fp  Fingerprint
		err error
	)
	switch {
	case hasPayload:
		if fp, err = PayloadFingerprint(r.Payload); err != nil {
			return r, nil, err
		}
	case r.Fingerprint != "":
		fp = ClientFingerprint(r.Fingerprint)
	}
	return r, fp, nil
}

func (r CompleteRequest) Normalize() (CompleteRequest, error) {
	var v violations
	r.Key = v.key(r.Key)
	v.check(r)
	if len(r.Result) > 0 && len(r.Result) <= MaxResultBytes {
		var obj map[string]json.RawMessage
		if json.Unmarshal(r.Result, &obj) != nil {
			v.field("result", "object", "result must be a JSON object")
		} else if obj == nil { // JSON null: no result
			r.Result = nil
		}
	}
	if r.Via == "" {
		r.Via = ViaPrimary
	}
	return r, v.err()
}

func (r FailRequest) Normalize() (FailRequest, error) {
	var v violations
	r.Key = v.key(r.Key)
	v.check(r)
	// A target's error text often echoes the record it refused.
	r.Message = redact.Redact(r.Message)
	return r, v.err()
}

func (r ResolveRequest) Normalize() (ResolveRequest, error) {
	var v violations
	r.Key = v.key(r.Key)
	r.By, r.Note = strings.TrimSpace(r.By), strings.TrimSpace(r.Note)
	v.check(r)
	if r.Final && r.Resolution != StateFailed {
		v.field("final", "resolution=failed", "final applies to a failed resolution only")
	}
	if r.Rerun && (r.Resolution != StateFailed || r.Final) {
		v.field("rerun", "resolution=failed,final=false", "a re-run applies to a retryable failed resolution only")
	}
	r.Note = redact.Redact(r.Note)
	return r, v.err()
}

func (q ListQuery) Normalize() (ListQuery, error) {
	var v violations
	// The prefix is matched against stored keys, which are trimmed.
	q.KeyPrefix = strings.TrimLeftFunc(q.KeyPrefix, unicode.IsSpace)
	v.check(q)
	if q.KeyPrefix != "" && q.Namespace == "" {
		v.field("key", "required_with=namespace", "a key prefix needs its namespace")
	}
	if q.Owner != "" && q.State == StateCompleted {
		v.field("owner", "excluded_with=state=completed", "search by owner finds failed, unknown or (with state reserved) reserved keys, not completed ones")
	}
	if q.Oldest && q.State != StateUnknown {
		v.field("state", "eq=unknown", "oldest first lists unknown keys only")
	}
	if (q.KeyPrefix != "" || q.Owner != "") && q.Oldest {
		v.field("oldest", "excluded_with=key owner", "oldest first cannot be combined with a key prefix or owner")
	}
	if q.Limit == 0 {
		q.Limit = 100
	}
	return q, v.err()
}

// cutRunes cuts s to at most n characters, the last "…" when cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// dropBidi drops the bidi embeddings, overrides and isolates (U+202A to
// U+202E, U+2066 to U+2069): unlike the marks (U+200E, U+200F) they
// reorder what follows them, past the end of a one-line field.
func dropBidi(r rune) rune {
	if r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 {
		return -1
	}
	return r
}
