package keystore

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/n8n-guard/n8n-guard/errs"
)

// The key and namespace rules live here and only here; the other input
// rules are the request types' validate tags (request.go, rules.go). The
// limits below are the ones code outside those rules needs as numbers;
// TestLimitsAreTheTags holds them to the tags.

const (
	MaxKeyBytes        = 255
	MaxNamespaceLength = 64
	MaxResultBytes     = 16 << 10 // CompleteRequest.Result
	MaxLeaseSeconds    = 86400    // ReserveRequest.Lease
	MaxByLength        = 128      // ResolveRequest.By
	MaxMessageLength   = 2000     // FailRequest.Message
	MaxNoteLength      = 2000     // ResolveRequest.Note
	MaxResumeURLLength = 2048     // ReserveRequest.ResumeURL, FailRequest.ResumeURL
	MaxSummaryLength   = 200      // ReserveRequest.Summary
)

var (
	namespaceRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	// An e-mail address anywhere in a key means personal data in it.
	emailRE = regexp.MustCompile(`[^\s@<>()\[\],;:"]+@[^\s@<>()\[\],;:"]+\.[A-Za-z]{2,}`)
)

// NormalizeKey trims surrounding white space and checks the key rules. It
// returns the key to store. A missing key is an error, never a random ID.
func NormalizeKey(key string) (string, error) {
	k := strings.TrimSpace(key)
	switch {
	case k == "":
		return "", fieldErr("key", "required", "key is missing or empty: send the stable ID of the event (e.g. the source event ID)")
	case len(k) > MaxKeyBytes:
		return "", fieldErr("key", "max=255", "key is longer than 255 bytes")
	case !utf8.ValidString(k) || strings.ContainsRune(k, utf8.RuneError):
		// U+FFFD is what a decoder makes of bytes or escapes that were not
		// valid: two different invalid keys would become one.
		return "", fieldErr("key", "utf8", "key is not valid UTF-8 (or contains U+FFFD, the mark of an invalid character)")
	case strings.IndexFunc(k, unicode.IsControl) >= 0:
		return "", fieldErr("key", "no_control", "key contains control characters")
	case strings.IndexFunc(k, invisible) >= 0:
		i := strings.IndexFunc(k, invisible)
		r, _ := utf8.DecodeRuneInString(k[i:])
		return "", fieldErr("key", "no_format", fmt.Sprintf("key contains the invisible character U+%04X at byte %d "+
			"(zero-width, bidi control or another Unicode format character, category Cf): "+
			"it would make two keys that look the same; send the key without it", r, i))
	case emailRE.MatchString(k):
		return "", fieldErr("key", "no_email", "key looks like it contains an e-mail address; keys must not carry personal data: use the source event ID or a hash")
	}
	return k, nil
}

// invisible reports a Unicode format character (category Cf): zero-width
// space and joiners, bidi controls, the byte order mark, soft hyphen. They
// print as nothing, so "evt\u200b1" and "evt1" would be two keys that
// nobody can tell apart.
func invisible(r rune) bool { return unicode.Is(unicode.Cf, r) }

// ValidNamespace reports whether s is a valid namespace or destination name.
func ValidNamespace(s string) bool {
	return len(s) >= 1 && len(s) <= MaxNamespaceLength && namespaceRE.MatchString(s)
}

// CheckNamespace returns an invalid_request error naming field when s is
// not a valid namespace-shaped name.
func CheckNamespace(field, s string) error {
	if ValidNamespace(s) {
		return nil
	}
	return &errs.Error{Code: errs.InvalidRequest,
		Message: field + " must be 1-64 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit",
		Fields:  []errs.FieldError{{Field: field, Rule: "namespace"}}}
}

func fieldErr(field, rule, msg string) error {
	return &errs.Error{Code: errs.InvalidKey, Message: msg, Fields: []errs.FieldError{{Field: field, Rule: rule}}}
}
