package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"

	"github.com/n8n-guard/n8n-guard/errs"
)

// newValidator is the validator of the bodies and queries api hands to
// notify (the key routes' rules are keystore's, applied by the store).
func newValidator() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	// Report fields by their JSON (or query) names, as the client sent them.
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		for _, tag := range []string{"json", "query"} {
			if name, _, _ := strings.Cut(f.Tag.Get(tag), ","); name != "" && name != "-" {
				return name
			}
		}
		return f.Name
	})
	return v
}

// check validates req by its tags and turns the failures into one
// invalid_request error listing every field that broke a rule.
func (s *Server) check(req any) error {
	err := s.validate.Struct(req)
	if err == nil {
		return nil
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		return fmt.Errorf("validate %T: %w", req, err)
	}
	out := &errs.Error{Code: errs.InvalidRequest}
	var msgs []string
	for _, fe := range ves {
		rule := fe.Tag()
		if fe.Param() != "" {
			rule += "=" + fe.Param()
		}
		out.Fields = append(out.Fields, errs.FieldError{Field: fe.Field(), Rule: rule})
		msgs = append(msgs, ruleMessage(fe.Field(), fe.Tag(), fe.Param()))
	}
	out.Message = strings.Join(msgs, "; ")
	return out
}

func ruleMessage(field, tag, param string) string {
	switch tag {
	case "required":
		return field + " is required"
	case "max":
		return fmt.Sprintf("%s must be at most %s", field, param)
	case "min":
		return fmt.Sprintf("%s must be at least %s", field, param)
	case "oneof":
		return fmt.Sprintf("%s must be one of: %s", field, param)
	}
	return fmt.Sprintf("%s breaks the rule %s", field, tag)
}

// decodeJSON reads a JSON object body into dst. Unknown members are
// ignored (clients may send more than we need); anything that is not a
// JSON object, or a member of the wrong type, is invalid_request.
func decodeJSON(body []byte, dst any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return &errs.Error{Code: errs.InvalidRequest, Message: "request body is empty: send a JSON object",
			Fields: []errs.FieldError{{Field: "body", Rule: "required"}}}
	}
	if body[0] != '{' {
		if !json.Valid(body) {
			return notJSON()
		}
		return &errs.Error{Code: errs.InvalidRequest, Message: "request body must be a JSON object",
			Fields: []errs.FieldError{{Field: "body", Rule: "type=object"}}}
	}
	// JSON is UTF-8 (RFC 8259); encoding/json would silently turn invalid
	// bytes into U+FFFD, making two different keys the same one.
	if !utf8.Valid(body) {
		return &errs.Error{Code: errs.InvalidRequest, Message: "request body is not valid UTF-8",
			Fields: []errs.FieldError{{Field: "body", Rule: "utf8"}}}
	}
	err := json.Unmarshal(body, dst)
	if err == nil {
		return nil
	}
	var (
		de *errs.Error
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &de):
		return de
	case errors.As(err, &te) && te.Field != "":
		want := jsonType(te.Type)
		return &errs.Error{Code: errs.InvalidRequest,
			Message: fmt.Sprintf("%s must be %s, not %s", te.Field, article(want), te.Value),
			Fields:  []errs.FieldError{{Field: te.Field, Rule: "type=" + want}}}
	}
	return notJSON()
}

func notJSON() error {
	return &errs.Error{Code: errs.InvalidRequest, Message: "request body is not valid JSON",
		Fields: []errs.FieldError{{Field: "body", Rule: "json"}}}
}

// jsonType names the JSON type a Go type is decoded from.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "object"
}

func article(typ string) string {
	if strings.IndexByte("aeiou", typ[0]) >= 0 {
		return "an " + typ
	}
	return "a " + typ
}

// keyString is a key as the client sent it: a JSON string, or a JSON
// number taken verbatim (n8n expressions often yield numeric IDs).
type keyString string

func (k *keyString) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*k = keyString(s)
		return nil
	case string(b) == "null":
		return nil
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*k = keyString(b)
		return nil
	}
	return &errs.Error{Code: errs.InvalidKey, Message: "key must be a string (or a number)",
		Fields: []errs.FieldError{{Field: "key", Rule: "type=string"}}}
}
