package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
)

// FuzzRequestDecoding sends arbitrary bodies (and query strings) to every
// route that decodes input: whatever arrives, the answer is never a 5xx,
// never a panic, always a JSON object without a top-level "error" key.
func FuzzRequestDecoding(f *testing.F) {
	e := start(f)
	e.unrecorded = true
	tok := e.accepted(f, "evt_fuzz")
	for _, seed := range []string{
		`{"namespace":"crm-contacts","key":"evt_1","owner":"n8n","lease_seconds":300,"payload":{"a":[1,2,{"b":null}]},"destination":"hubspot"}`,
		`{"namespace":"crm-contacts","key":"evt_fuzz","token":"` + tok + `","result_ref":"r","result":{"id":1},"via":"fallback"}`,
		`{"namespace":"crm-contacts","key":"evt_fuzz","token":"` + tok + `","reason":"outcome_unknown","retryable":false,"message":"m"}`,
		`{"namespace":"crm-contacts","key":"evt_fuzz","resolution":"completed","by":"me","note":"n","force":true}`,
		`{"execution":{"id":"1","error":{"message":"x"}},"workflow":{"id":"1","name":"w"}}`,
		`{"trigger":{"error":{"message":"x"}},"workflow":{}}`,
		`{"key":12e400}`, `{"key":-0.0e-0}`, `{"lease_seconds":1e99}`, `{"payload":` + "\"\\ud800\"" + `}`,
		`{"namespace":"a","key":"b","fingerprint":null,"payload":null}`,
		`[]`, `null`, `"str"`, `{`, `{"a":1}{"b":2}`, "\xff\xfe", `{"key":"` + "\u2028" + `"}`,
		`namespace=crm-contacts&key=evt_1`, `namespace=crm-contacts&key=%ff`, `state=unknown&limit=-1&cursor=zz`,
	} {
		for route := range fuzzRoutes {
			f.Add(uint8(route), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		var res *resp
		if r.method == http.MethodGet {
			q, err := url.ParseQuery(string(body))
			if err != nil {
				q = url.Values{"namespace": {"crm-contacts"}, "key": {string(body)}}
			}
			res = e.call(t, r.method, r.path+"?"+q.Encode(), nil)
		} else {
			res = e.call(t, r.method, r.path, body)
		}
		if res.Status >= 500 {
			t.Fatalf("%s %s %q -> %s", r.method, r.path, body, res)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(res.Body, &top); err != nil {
			t.Fatalf("%s %s %q: answer is not a JSON object: %s", r.method, r.path, body, res)
		}
		if _, ok := top["error"]; ok {
			t.Fatalf("%s %s %q: top-level error key: %s", r.method, r.path, body, res)
		}
	})
}

var fuzzRoutes = []struct{ method, path string }{
	{http.MethodPost, "/v1/reserve"},
	{http.MethodPost, "/v1/complete"},
	{http.MethodPost, "/v1/fail"},
	{http.MethodPost, "/v1/resolve"},
	{http.MethodPost, "/v1/n8n/error"},
	{http.MethodGet, "/v1/lookup"},
	{http.MethodGet, "/v1/keys"},
	{http.MethodGet, "/v1/notifications"},
}
