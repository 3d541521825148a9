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
	Namespace   string
	Key         string
	Owner       string
	Lease       time.Duration // zero: the namespace's lease
	Payload     json.RawMessage
	Fingerprint string
	Destination string
	// RequestID identifies the attempt's request (n8n: execution id and
	// node name). Repeated while its lease is live, the reserve answers
	// accepted again with the same token (DecideReserve).
	RequestID string
	// ResumeURL, when the destination is paused, parks the key instead of
	// answering destination_paused (park.go).
	ResumeURL string
}

// CompleteRequest reports that the attempt holding Token took effect.
type CompleteRequest struct {
	Namespace string
	Key       string
	Token     string
	ResultRef string
	Result    json.RawMessage
	Via       Via
}

// FailRequest reports that the attempt holding Token did not take effect,
// or that nobody knows (outcome_unknown).
type FailRequest struct {
	Namespace string
	Key       string
	Token     string
	Reason    Reason
	Retryable *bool // nil: the reason's default
	Message   string
	// ResumeURL parks the key when the failure leaves the destination's
	// breaker open (park.go).
	ResumeURL string
}

// ResolveRequest is a person's decision about a key.
type ResolveRequest struct {
	Namespace  string
	Key        string
	Resolution State // StateCompleted or StateFailed
	By         string
	Note       string
	ResultRef  string
	Force      bool
	// Final, with resolution failed: no new attempt may start (the key
	// answers rejected), instead of the default retryable.
	Final bool
}

// ListQuery selects a page of records.
type ListQuery struct {
	Namespace string // empty: all namespaces
	State     State  // empty: all states
	// KeyPrefix selects keys that begin with it; it needs Namespace.
	KeyPrefix string
	// Owner selects keys whose last attempt's lease holder is exactly it:
	// the failed and unknown keys (the ones a person acts on), or with
	// State reserved the attempts in flight. Completed keys are not
	// searched by owner.
	Owner string
	// Oldest lists unknown keys by the time they went unknown, oldest
	// first: the queue a person works through. It needs State unknown.
	Oldest bool
	Limit  int
	Cursor string
}

// Page is one page of a listing.
type Page struct {
	Items      []*Record
	NextCursor string
}

// The Normalize methods apply the contract's input rules. Every backend
// calls them first, so a store refuses bad input even without the API.

// CheckIdentity checks a namespace and returns the normalized key.
func CheckIdentity(ns, key string) (string, error) {
	if err := CheckNamespace("namespace", ns); err != nil {
		return "", err
	}
	return NormalizeKey(key)
}

// InvalidField is the invalid_request error about one field.
func InvalidField(field, rule, msg string) error {
	return &Error{Code: EInvalidRequest, Message: msg, Fields: []FieldError{{Field: field, Rule: rule}}}
}

func (r ReserveRequest) Normalize() (ReserveRequest, Fingerprint, error) {
	var err error
	if r.Key, err = CheckIdentity(r.Namespace, r.Key); err != nil {
		return r, nil, err
	}
	if utf8.RuneCountInString(r.Owner) > MaxOwnerLength {
		return r, nil, InvalidField("owner", "max=128", "owner is longer than 128 characters")
	}
	if err := checkText("owner", r.Owner, true); err != nil {
		return r, nil, err
	}
	if err := checkText("fingerprint", r.Fingerprint, true); err != nil {
		return r, nil, err
	}
	if r.Lease < 0 || r.Lease > MaxLeaseSeconds*time.Second {
		return r, nil, InvalidField("lease_seconds", "min=1,max=86400", "lease_seconds must be 1-86400")
	}
	if r.Destination != "" {
		if err := CheckNamespace("destination", r.Destination); err != nil {
			return r, nil, err
		}
	}
	if utf8.RuneCountInString(r.Fingerprint) > MaxFingerprintLen {
		return r, nil, InvalidField("fingerprint", "max=128", "fingerprint is longer than 128 characters")
	}
	if utf8.RuneCountInString(r.RequestID) > MaxRequestIDLength {
		return r, nil, InvalidField("request_id", "max=128", "request_id is longer than 128 characters")
	}
	if err := checkText("request_id", r.RequestID, true); err != nil {
		return r, nil, err
	}
	if err := CheckResumeURL(r.ResumeURL); err != nil {
		return r, nil, err
	}
	var fp Fingerprint
	switch {
	case len(r.Payload) > 0 && r.Fingerprint != "":
		return r, nil, InvalidField("fingerprint", "excluded_with=payload", "send either payload or fingerprint, not both")
	case len(r.Payload) > 0 && strings.TrimSpace(string(r.Payload)) != "null":
		if fp, err = PayloadFingerprint(r.Payload); err != nil {
			return r, nil, err
		}
	case r.Fingerprint != "":
		fp = ClientFingerprint(r.Fingerprint)
	}
	return r, fp, nil
}

// checkText refuses what cannot be stored and read back: invalid UTF-8, and
// control characters in one-line fields.
func checkText(field, v string, oneLine bool) error {
	if !utf8.ValidString(v) {
		return InvalidField(field, "utf8", field+" is not valid UTF-8")
	}
	if oneLine && strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return InvalidField(field, "no_control", field+" contains control characters")
	}
	return nil
}

func checkToken(token string) error {
	if token == "" {
		return InvalidField("token", "required", "token is required: pass the token the accepted reserve returned")
	}
	if len(token) > 256 {
		return InvalidField("token", "max=256", "token is too long")
	}
	return nil
}

func (r CompleteRequest) Normalize() (CompleteRequest, error) {
	var err error
	if r.Key, err = CheckIdentity(r.Namespace, r.Key); err != nil {
		return r, err
	}
	if err := checkToken(r.Token); err != nil {
		return r, err
	}
	if utf8.RuneCountInString(r.ResultRef) > MaxResultRefLength {
		return r, InvalidField("result_ref", "max=512", "result_ref is longer than 512 characters")
	}
	if err := checkText("result_ref", r.ResultRef, true); err != nil {
		return r, err
	}
	if len(r.Result) > 0 {
		if len(r.Result) > MaxResultBytes {
			return r, InvalidField("result", "max=16KiB", "result is larger than 16 KiB")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(r.Result, &obj) != nil {
			return r, InvalidField("result", "object", "result must be a JSON object")
		}
		if obj == nil { // JSON null: no result
			r.Result = nil
		}
	}
	switch r.Via {
	case "":
		r.Via = ViaPrimary
	case ViaPrimary, ViaFallback:
	default:
		return r, InvalidField("via", "oneof=primary fallback", "via must be primary or fallback")
	}
	return r, nil
}

func (r FailRequest) Normalize() (FailRequest, error) {
	var err error
	if r.Key, err = CheckIdentity(r.Namespace, r.Key); err != nil {
		return r, err
	}
	if err := checkToken(r.Token); err != nil {
		return r, err
	}
	if !ValidReason(r.Reason) {
		return r, InvalidField("reason", "oneof=destination_unreachable destination_failed validation_failed outcome_unknown",
			"reason must be destination_unreachable, destination_failed, validation_failed or outcome_unknown")
	}
	if utf8.RuneCountInString(r.Message) > MaxMessageLength {
		return r, InvalidField("message", "max=2000", "message is longer than 2000 characters")
	}
	if err := checkText("message", r.Message, false); err != nil {
		return r, err
	}
	if err := CheckResumeURL(r.ResumeURL); err != nil {
		return r, err
	}
	// A target's error text often echoes the record it refused.
	r.Message = redact.Redact(r.Message)
	return r, nil
}

func (r ResolveRequest) Normalize() (ResolveRequest, error) {
	var err error
	if r.Key, err = CheckIdentity(r.Namespace, r.Key); err != nil {
		return r, err
	}
	if r.Resolution != StateCompleted && r.Resolution != StateFailed {
		return r, InvalidField("resolution", "oneof=completed failed", "resolution must be completed or failed")
	}
	if r.Final && r.Resolution != StateFailed {
		return r, InvalidField("final", "resolution=failed", "final applies to a failed resolution only")
	}
	r.By, r.Note = strings.TrimSpace(r.By), strings.TrimSpace(r.Note)
	if r.By == "" || utf8.RuneCountInString(r.By) > MaxByLength {
		return r, InvalidField("by", "required,max=128", "by is required: the person who decided (at most 128 characters)")
	}
	if r.Note == "" || utf8.RuneCountInString(r.Note) > MaxNoteLength {
		return r, InvalidField("note", "required,max=2000", "note is required: what was checked and decided (at most 2000 characters)")
	}
	if utf8.RuneCountInString(r.ResultRef) > MaxResultRefLength {
		return r, InvalidField("result_ref", "max=512", "result_ref is longer than 512 characters")
	}
	for _, f := range []struct {
		name, v string
		oneLine bool
	}{{"by", r.By, true}, {"note", r.Note, false}, {"result_ref", r.ResultRef, true}} {
		if err := checkText(f.name, f.v, f.oneLine); err != nil {
			return r, err
		}
	}
	r.Note = redact.Redact(r.Note)
	return r, nil
}

func (q ListQuery) Normalize() (ListQuery, error) {
	if q.Namespace != "" {
		if err := CheckNamespace("namespace", q.Namespace); err != nil {
			return q, err
		}
	}
	switch q.State {
	case "", StateReserved, StateCompleted, StateFailed, StateUnknown, StateParked:
	default:
		return q, InvalidField("state", "oneof=reserved completed failed unknown parked", "state must be reserved, completed, failed, unknown or parked")
	}
	if q.KeyPrefix != "" {
		if q.Namespace == "" {
			return q, InvalidField("key", "required_with=namespace", "a key prefix needs its namespace")
		}
		// The prefix is matched against stored keys, which are trimmed.
		q.KeyPrefix = strings.TrimLeftFunc(q.KeyPrefix, unicode.IsSpace)
		if len(q.KeyPrefix) > MaxKeyBytes || !utf8.ValidString(q.KeyPrefix) {
			return q, InvalidField("key", "max=255", "a key prefix is at most 255 bytes of UTF-8")
		}
	}
	if utf8.RuneCountInString(q.Owner) > MaxOwnerLength {
		return q, InvalidField("owner", "max=128", "owner is longer than 128 characters")
	}
	if q.Owner != "" && q.State == StateCompleted {
		return q, InvalidField("owner", "excluded_with=state=completed", "search by owner finds failed, unknown or (with state reserved) reserved keys, not completed ones")
	}
	if q.Oldest && q.State != StateUnknown {
		return q, InvalidField("state", "eq=unknown", "oldest first lists unknown keys only")
	}
	if (q.KeyPrefix != "" || q.Owner != "") && q.Oldest {
		return q, InvalidField("oldest", "excluded_with=key owner", "oldest first cannot be combined with a key prefix or owner")
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > 1000 {
		q.Limit = 1000
	}
	return q, nil
}
