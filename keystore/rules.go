package keystore

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"

	"github.com/n8n-guard/n8n-guard/errs"
)

// The input rules of the request types are their validate tags: each
// limit is written once, there, and the message a caller reads is built
// from the same tag. Fields are named as the contract names them (the
// json tag). Tags of our own:
//
//	namespace      ValidNamespace
//	utf8           valid UTF-8
//	no_control     no control characters (one-line fields)
//	no_format      no invisible format characters (category Cf), as keys
//	one_line       no line or paragraph separator (U+2028, U+2029)
//	one_script     letters of one script (person.go: people's identifiers)
//	max_bytes=N    at most N bytes (a JSON value, a key prefix)
//	max_seconds=N  a duration of at most N seconds, reported as max=N
var rules = sync.OnceValue(func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			return name
		}
		return f.Name
	})
	for tag, fn := range map[string]validator.Func{
		"namespace": func(fl validator.FieldLevel) bool { return ValidNamespace(fl.Field().String()) },
		"utf8":      func(fl validator.FieldLevel) bool { return utf8.ValidString(fl.Field().String()) },
		"no_control": func(fl validator.FieldLevel) bool {
			return strings.IndexFunc(fl.Field().String(), unicode.IsControl) < 0
		},
		"no_format":  func(fl validator.FieldLevel) bool { return strings.IndexFunc(fl.Field().String(), invisible) < 0 },
		"one_script": func(fl validator.FieldLevel) bool { return onePersonScript(fl.Field().String()) },
		"one_line":   func(fl validator.FieldLevel) bool { return !strings.ContainsAny(fl.Field().String(), "\u2028\u2029") },
		"max_bytes": func(fl validator.FieldLevel) bool {
			n, err := strconv.Atoi(fl.Param())
			return err == nil && fl.Field().Len() <= n
		},
		"max_seconds": func(fl validator.FieldLevel) bool {
			n, err := strconv.Atoi(fl.Param())
			return err == nil && time.Duration(fl.Field().Int()) <= time.Duration(n)*time.Second
		},
	} {
		if err := v.RegisterValidation(tag, fn); err != nil {
			panic(err) // a malformed tag name: a programming error
		}
	}
	return v
})

// violations collects every broken rule of one request, so one answer
// names every field at fault.
type violations struct {
	code   errs.Code // invalid_key when the key is at fault, else invalid_request
	fields []errs.FieldError
	msgs   []string
}

// key applies the key rule (once) and returns the key to store.
func (v *violations) key(key string) string {
	k, err := NormalizeKey(key)
	if err != nil {
		v.code = errs.InvalidKey
		var e *errs.Error
		if errors.As(err, &e) {
			v.fields = append(v.fields, e.Fields...)
			v.msgs = append([]string{e.Message}, v.msgs...) // the key's message first
		}
	}
	return k
}

// check runs the validate tags of req.
func (v *violations) check(req any) {
	err := rules().Struct(req)
	if err == nil {
		return
	}
	var ves validator.ValidationErrors
	if !errors.As(err, &ves) {
		panic(fmt.Sprintf("validate %T: %v", req, err)) // a malformed tag: a programming error
	}
	for _, fe := range ves {
		rule, param := fe.Tag(), fe.Param()
		if rule == "max_seconds" {
			rule = "max"
		}
		if param != "" {
			rule += "=" + param
		}
		v.field(fe.Field(), rule, message(fe.Field(), fe.Tag(), param))
	}
}

// add takes the fields of a domain error (nil: nothing broken).
func (v *violations) add(err error) {
	var e *errs.Error
	if errors.As(err, &e) {
		v.fields = append(v.fields, e.Fields...)
		v.msgs = append(v.msgs, e.Message)
	}
}

func (v *violations) field(name, rule, msg string) {
	v.fields = append(v.fields, errs.FieldError{Field: name, Rule: rule})
	v.msgs = append(v.msgs, msg)
}

func (v *violations) err() error {
	if len(v.fields) == 0 {
		return nil
	}
	code := v.code
	if code == "" {
		code = errs.InvalidRequest
	}
	return &errs.Error{Code: code, Message: strings.Join(v.msgs, "; "), Fields: v.fields}
}

// message says what a rule asks, from the rule itself.
func message(field, tag, param string) string {
	switch tag {
	case "required":
		return field + " is required"
	case "max", "max_seconds":
		return fmt.Sprintf("%s must be at most %s", field, param)
	case "max_bytes":
		return fmt.Sprintf("%s must be at most %s bytes", field, param)
	case "min":
		return fmt.Sprintf("%s must be at least %s", field, param)
	case "oneof":
		return fmt.Sprintf("%s must be one of: %s", field, param)
	case "namespace":
		return field + " must be 1-64 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
	case "http_url":
		return field + " must be an absolute http:// or https:// URL"
	case "utf8":
		return field + " is not valid UTF-8"
	case "no_control":
		return field + " contains control characters"
	case "no_format":
		return field + " contains an invisible character (zero-width, bidi control or another Unicode format character, category Cf): " +
			"it would make two names that look the same; send it without"
	case "one_line":
		return field + " is one line: it contains a line or paragraph separator (U+2028, U+2029)"
	case "one_script":
		return field + " mixes letters of scripts that do not go together (e.g. a Cyrillic letter in a Latin name): " +
			"it would look like another person's name; write it in one script"
	}
	return fmt.Sprintf("%s breaks the rule %s", field, tag)
}

// Rules returns the input rules of a request type, field (as the contract
// names it) to its validate tag, for the test that holds docs/openapi.yaml
// to them.
func Rules(req any) map[string]string {
	out := map[string]string{}
	t := reflect.TypeOf(req)
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag := f.Tag.Get("validate"); tag != "" && name != "" && name != "-" {
			out[name] = tag
		}
	}
	return out
}
