package api

import (
	"errors"
	"testing"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// FuzzDecodeBodies runs the decoder and the validator of every request
// body in process (many thousand inputs a second, where
// FuzzRequestDecoding goes over HTTP): whatever the bytes, no panic, and a
// refusal is always one domain error with a 4xx code and the fields it
// blames; an accepted body always has a valid namespace and key.
func FuzzDecodeBodies(f *testing.F) {
	for _, seed := range []string{
		`{"namespace":"crm-contacts","key":"evt_1","owner":"n8n","lease_seconds":300,"payload":{"a":[1,2]},"destination":"hubspot"}`,
		`{"namespace":"crm-contacts","key":12345,"token":"t","result_ref":"r","result":{"id":1},"via":"fallback"}`,
		`{"namespace":"crm-contacts","key":"evt_1","token":"t","reason":"outcome_unknown","retryable":false}`,
		`{"namespace":"crm-contacts","key":"evt_1","resolution":"completed","by":"me","note":"n","force":true}`,
		`{"key":" a@b.example "}`, `{"key":-0.0e-0}`, `{"lease_seconds":1e99}`, `{"namespace":"A"}`,
		`[]`, `null`, `{`, "\xff", `{"key":"\u0000"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, req := range []any{&reserveRequest{}, &completeRequest{}, &failRequest{}, &resolveRequest{}} {
			err := decodeJSON(body, req)
			var ns, key string
			if err == nil {
				ns, key, err = normalize(req)
			}
			if err == nil {
				if !keystore.ValidNamespace(ns) {
					t.Fatalf("%T accepted namespace %q", req, ns)
				}
				if _, kerr := keystore.NormalizeKey(key); kerr != nil {
					t.Fatalf("%T accepted key %q: %v", req, key, kerr)
				}
				continue
			}
			var de *errs.Error
			if !errors.As(err, &de) {
				t.Fatalf("%T %q: not a domain error: %v", req, body, err)
			}
			if st := problem.Status(de.Code); st < 400 || st > 499 || len(de.Fields) == 0 || de.Message == "" {
				t.Fatalf("%T %q: refusal %+v (status %d)", req, body, de, st)
			}
		}
	})
}

// normalize applies the domain's rules to a decoded body, as the store
// does, and returns the namespace and key it would store.
func normalize(req any) (ns, key string, err error) {
	switch r := req.(type) {
	case *reserveRequest:
		dr, err := r.domain()
		if err != nil {
			return "", "", err
		}
		n, _, err := dr.Normalize()
		return n.Namespace, n.Key, err
	case *completeRequest:
		n, err := r.domain().Normalize()
		return n.Namespace, n.Key, err
	case *failRequest:
		n, err := r.domain().Normalize()
		return n.Namespace, n.Key, err
	case *resolveRequest:
		n, err := r.domain().Normalize()
		return n.Namespace, n.Key, err
	}
	panic("unknown request type")
}
