package keystore

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/n8n-guard/n8n-guard/errs"
)

// A Fingerprint identifies the payload an event carried, so that a key sent
// again with a different payload is caught (key_reused). Only the hash is
// kept. The first byte says where it came from: 'p' a payload hashed here,
// 'c' the client's own fingerprint; fingerprints of different kinds are not
// compared, since they cannot be.
type Fingerprint []byte

const fingerprintHashLen = 16 // 128 bits: plenty to detect reuse, half the bytes on disk

// PayloadFingerprint hashes the canonical form of a JSON payload.
func PayloadFingerprint(payload json.RawMessage) (Fingerprint, error) {
	c, err := CanonicalJSON(payload)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c)
	return append(Fingerprint{'p'}, sum[:fingerprintHashLen]...), nil
}

// ClientFingerprint wraps a caller-supplied fingerprint.
func ClientFingerprint(fp string) Fingerprint {
	sum := sha256.Sum256([]byte(fp))
	return append(Fingerprint{'c'}, sum[:fingerprintHashLen]...)
}

// Conflicts reports whether two fingerprints prove different payloads.
func (f Fingerprint) Conflicts(other Fingerprint) bool {
	if len(f) == 0 || len(other) == 0 || f[0] != other[0] {
		return false
	}
	return !bytes.Equal(f, other)
}

// CanonicalJSON returns a form of the JSON document in which object key
// order, white space and number spelling (1, 1.0, 1e0) do not matter.
func CanonicalJSON(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &errs.Error{Code: errs.InvalidRequest, Message: "payload is not valid JSON",
			Fields: []errs.FieldError{{Field: "payload", Rule: "json"}}}
	}
	if dec.More() {
		return nil, &errs.Error{Code: errs.InvalidRequest, Message: "payload has trailing data",
			Fields: []errs.FieldError{{Field: "payload", Rule: "json"}}}
	}
	var b strings.Builder
	if err := writeCanonical(&b, v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func writeCanonical(b *strings.Builder, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		b.WriteString(canonicalNumber(string(x)))
	case string:
		writeString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeCanonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k)
			b.WriteByte(':')
			if err := writeCanonical(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical json: unexpected %T", v)
	}
	return nil
}

func writeString(b *strings.Builder, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	b.Write(bytes.TrimRight(buf.Bytes(), "\n"))
}

// canonicalNumber keeps integers exactly (IDs can exceed float64) and
// spells every other number the shortest way that round-trips.
func canonicalNumber(s string) string {
	if !strings.ContainsAny(s, ".eE") {
		if s == "-0" {
			return "0"
		}
		return s
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return s
	}
	if f == 0 {
		return "0"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
