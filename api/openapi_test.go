package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/n8n-guard/n8n-guard/keystore"
)

const specPath = "../docs/openapi.yaml"

type specDoc struct{ doc *openapi3.T }

func loadSpec() (*specDoc, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(specPath)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", specPath, err)
	}
	// Validate also checks every example in the document against its schema.
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		return nil, fmt.Errorf("%s is not valid: %w", specPath, err)
	}
	return &specDoc{doc: doc}, nil
}

// find is the path item whose template matches path ({name} stands for
// one segment, as sent, still URL-encoded).
func (s *specDoc) find(path string) *openapi3.PathItem {
	if item := s.doc.Paths.Value(path); item != nil {
		return item
	}
	segs := strings.Split(path, "/")
	for tmpl, item := range s.doc.Paths.Map() {
		t := strings.Split(tmpl, "/")
		if len(t) != len(segs) || !strings.Contains(tmpl, "{") {
			continue
		}
		match := true
		for i := range t {
			if !(strings.HasPrefix(t[i], "{") && segs[i] != "") && t[i] != segs[i] {
				match = false
				break
			}
		}
		if match {
			return item
		}
	}
	return nil
}

// validate checks a response against the operation's documented response.
func (s *specDoc) validate(r *resp) error {
	path, _, _ := strings.Cut(r.Path, "?")
	item := s.find(path)
	var schema *openapi3.Schema
	ct := r.Header.Get("Content-Type")
	if item == nil || item.GetOperation(r.Method) == nil {
		// No such route: the answer must be a documented 404 problem.
		if r.Status != http.StatusNotFound && r.Status != http.StatusUnauthorized && r.Status != http.StatusRequestEntityTooLarge {
			return fmt.Errorf("undocumented route answered %d", r.Status)
		}
		schema = s.doc.Components.Schemas["Problem"].Value
	} else {
		op := item.GetOperation(r.Method)
		ref := op.Responses.Status(r.Status)
		if ref == nil {
			return fmt.Errorf("status %d is not documented for %s %s", r.Status, r.Method, path)
		}
		mt := ref.Value.Content.Get(ct)
		if mt == nil {
			return fmt.Errorf("content type %q is not documented for %d", ct, r.Status)
		}
		if mt.Schema == nil {
			return nil
		}
		schema = mt.Schema.Value
	}
	if !strings.Contains(ct, "json") {
		return nil
	}
	var v any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		return err
	}
	return s.doc.ValidateSchemaJSON(schema, v, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors())
}

// Every route the app registers is in the spec, and every operation of the
// spec is a registered route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	spec, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	e := start(t)
	registered := map[string]bool{}
	param := regexp.MustCompile(`:(\w+)`) // fiber's :name is OpenAPI's {name}
	for _, r := range e.srv.Routes() {
		registered[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	documented := map[string]bool{}
	for path, item := range spec.doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	var missing, extra []string
	for r := range registered {
		if !documented[r] {
			missing = append(missing, r)
		}
	}
	for d := range documented {
		if !registered[d] {
			extra = append(extra, d)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes the app registers but docs/openapi.yaml lacks: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("operations docs/openapi.yaml documents but the app does not register: %v", extra)
	}
	if len(registered) < 12 {
		t.Errorf("only %d routes registered: %v", len(registered), registered)
	}
}

// The examples in the document validate against their schemas (loadSpec
// validates them), and every /v1 operation documents 401.
func TestOpenAPIDocument(t *testing.T) {
	spec, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	if !spec.doc.IsOpenAPI31OrLater() {
		t.Errorf("docs/openapi.yaml is OpenAPI %s, want 3.1", spec.doc.OpenAPI)
	}
	examples := 0
	for path, item := range spec.doc.Paths.Map() {
		for method, op := range item.Operations() {
			if strings.HasPrefix(path, "/v1/") && op.Responses.Status(401) == nil {
				t.Errorf("%s %s does not document 401", method, path)
			}
			if strings.HasPrefix(path, "/v1/") && op.Responses.Status(403) == nil {
				t.Errorf("%s %s does not document 403", method, path)
			}
			for code, ref := range op.Responses.Map() {
				for ct, mt := range ref.Value.Content {
					check := func(name string, v any) {
						examples++
						if err := spec.doc.ValidateSchemaJSON(mt.Schema.Value, roundTrip(t, v), openapi3.EnableJSONSchema2020()); err != nil {
							t.Errorf("%s %s %s %s example %s: %v", method, path, code, ct, name, err)
						}
					}
					if mt.Example != nil {
						check("example", mt.Example)
					}
					for name, ex := range mt.Examples {
						check(name, ex.Value.Value)
					}
				}
			}
		}
	}
	if examples < 8 {
		t.Errorf("only %d response examples checked", examples)
	}
}

func roundTrip(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// docs/openapi.yaml states the same input limits as the code: each
// maxLength, maximum and enum of a request body is its field's validate
// tag in keystore, and each limit a tag states is documented.
func TestOpenAPILimitsAreTheCode(t *testing.T) {
	spec, err := loadSpec()
	if err != nil {
		t.Fatal(err)
	}
	for schema, req := range map[string]any{
		"ReserveRequest": keystore.ReserveRequest{}, "CompleteRequest": keystore.CompleteRequest{},
		"FailRequest": keystore.FailRequest{}, "ResolveRequest": keystore.ResolveRequest{},
	} {
		props := spec.doc.Components.Schemas[schema].Value.Properties
		for field, tag := range keystore.Rules(req) {
			ref := props[field]
			if ref == nil {
				t.Errorf("%s.%s (%s) is not documented", schema, field, tag)
				continue
			}
			p := ref.Value
			var documented []string
			if strings.HasSuffix(ref.Ref, "/Namespace") {
				documented = append(documented, "namespace")
			} else if p.MaxLength != nil {
				documented = append(documented, fmt.Sprintf("max=%d", *p.MaxLength))
			}
			if p.Max != nil {
				documented = append(documented, fmt.Sprintf("max=%g", *p.Max))
			}
			if len(p.Enum) > 0 {
				var e []string
				for _, v := range p.Enum {
					e = append(e, fmt.Sprint(v))
				}
				documented = append(documented, "oneof="+strings.Join(e, " "))
			}
			if slices.Contains(spec.doc.Components.Schemas[schema].Value.Required, field) && !strings.HasSuffix(ref.Ref, "/Namespace") {
				documented = append(documented, "required")
			}
			var coded []string
			for _, rule := range strings.Split(tag, ",") {
				name, param, _ := strings.Cut(rule, "=")
				switch name {
				case "max", "max_seconds":
					coded = append(coded, "max="+param)
				case "oneof", "required", "namespace":
					coded = append(coded, rule)
				case "max_bytes": // documented in prose (a JSON value's size)
				}
			}
			if field == "by" {
				// The API fills by from a named token (DecidedBy): the
				// wire may leave it out; the domain requires it of what
				// reaches the store.
				coded = slices.DeleteFunc(coded, func(r string) bool { return r == "required" })
			}
			slices.Sort(documented)
			slices.Sort(coded)
			if !slices.Equal(documented, coded) {
				t.Errorf("%s.%s: docs/openapi.yaml says %v, the code (validate:%q) %v", schema, field, documented, tag, coded)
			}
		}
	}
	if ns := spec.doc.Components.Schemas["Namespace"].Value; ns.MaxLength == nil || *ns.MaxLength != keystore.MaxNamespaceLength {
		t.Errorf("Namespace: docs say maxLength %v, the code %d", ns.MaxLength, keystore.MaxNamespaceLength)
	}
	limit := spec.doc.Paths.Value("/v1/keys").Get.Parameters.GetByInAndName("query", "limit").Schema.Value
	if tag := keystore.Rules(keystore.ListQuery{})["limit"]; limit.Max == nil || !strings.Contains(tag, fmt.Sprintf("max=%g", *limit.Max)) {
		t.Errorf("GET /v1/keys limit: docs say %v, the code %q", limit.Max, tag)
	}
}
