package keystore_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The limits code needs as numbers are the ones the tags state.
func TestLimitsAreTheTags(t *testing.T) {
	for _, c := range []struct {
		req   any
		field string
		want  string
	}{
		{keystore.ReserveRequest{}, "lease_seconds", "max_seconds=" + strconv.Itoa(keystore.MaxLeaseSeconds)},
		{keystore.CompleteRequest{}, "result", "max_bytes=" + strconv.Itoa(keystore.MaxResultBytes)},
		{keystore.ResolveRequest{}, "by", "max=" + strconv.Itoa(keystore.MaxByLength)},
		{keystore.ListQuery{}, "key", "max_bytes=" + strconv.Itoa(keystore.MaxKeyBytes)},
		{keystore.FailRequest{}, "message", "max=" + strconv.Itoa(keystore.MaxMessageLength)},
		{keystore.ResolveRequest{}, "note", "max=" + strconv.Itoa(keystore.MaxNoteLength)},
		{keystore.ReserveRequest{}, "resume_url", "max=" + strconv.Itoa(keystore.MaxResumeURLLength)},
		{keystore.FailRequest{}, "resume_url", "max=" + strconv.Itoa(keystore.MaxResumeURLLength)},
		{keystore.ReserveRequest{}, "summary", "max=" + strconv.Itoa(keystore.MaxSummaryLength)},
	} {
		if tag := keystore.Rules(c.req)[c.field]; !strings.Contains(tag, c.want) {
			t.Errorf("%T.%s: tag %q lacks %s", c.req, c.field, tag, c.want)
		}
	}
}

// One request with many broken fields names every one of them, the key's
// first (and then the code is invalid_key).
func TestEveryBrokenFieldIsReported(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct {
		name   string
		err    func() error
		code   errs.Code
		fields []string // field=rule
	}{
		{"reserve", func() error {
			_, _, err := keystore.ReserveRequest{Namespace: "Bad NS", Key: " ", Owner: long(129), Lease: 86401 * time.Second,
				Fingerprint: "a\x00b", Destination: "Hub Spot", RequestID: long(129)}.Normalize()
			return err
		}, errs.InvalidKey, []string{"key=required", "namespace=namespace", "owner=max=128", "lease_seconds=max=86400",
			"fingerprint=no_control", "destination=namespace", "request_id=max=128"}},
		{"complete", func() error {
			_, err := keystore.CompleteRequest{Namespace: "crm", Key: "evt_1", ResultRef: long(513), Via: "tertiary"}.Normalize()
			return err
		}, errs.InvalidRequest, []string{"token=required", "result_ref=max=512", "via=oneof=primary fallback"}},
		{"fail", func() error {
			_, err := keystore.FailRequest{Namespace: "crm", Key: "evt_1", Token: "1.a", Reason: "oops", Message: long(2001)}.Normalize()
			return err
		}, errs.InvalidRequest, []string{"reason=oneof=destination_unreachable destination_failed validation_failed outcome_unknown", "message=max=2000"}},
		{"resolve", func() error {
			_, err := keystore.ResolveRequest{Namespace: "crm", Key: "evt_1", Resolution: "maybe", By: "  ", Note: "\t", Final: true}.Normalize()
			return err
		}, errs.InvalidRequest, []string{"resolution=oneof=completed failed", "by=required", "note=required", "final=resolution=failed"}},
		{"list", func() error {
			_, err := keystore.ListQuery{State: "lost", Limit: 5000, KeyPrefix: "bk-"}.Normalize()
			return err
		}, errs.InvalidRequest, []string{"state=oneof=reserved completed failed unknown parked", "limit=max=1000", "key=required_with=namespace"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.err()
			var e *errs.Error
			if err == nil || !asErr(err, &e) {
				t.Fatalf("err = %v", err)
			}
			if e.Code != c.code {
				t.Errorf("code %s, want %s", e.Code, c.code)
			}
			var got []string
			for _, f := range e.Fields {
				got = append(got, f.Field+"="+f.Rule)
			}
			for _, want := range c.fields {
				found := false
				for _, g := range got {
					found = found || g == want
				}
				if !found {
					t.Errorf("fields %v lack %s", got, want)
				}
			}
			if len(got) != len(c.fields) {
				t.Errorf("fields %v, want exactly %v", got, c.fields)
			}
			if strings.Count(e.Message, ";") != len(c.fields)-1 {
				t.Errorf("message does not say each: %q", e.Message)
			}
		})
	}
}

func asErr(err error, e **errs.Error) bool {
	x, ok := err.(*errs.Error)
	*e = x
	return ok
}
