package notify

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/n8n-guard/n8n-guard/errs"
)

// failure is what is kept of one Error Trigger item: names, ids and a
// redacted, truncated message. Request bodies, headers, node parameters,
// stack traces and error contexts are never read into it.
type failure struct {
	Failure
	Message string
	Variant string // "execution" or "trigger"
}

// parseErrorTrigger reads the item n8n's Error Trigger outputs, in either
// variant. Every inner field may be missing or of an unexpected type; only
// the presence of execution or trigger is required.
func parseErrorTrigger(body []byte) (failure, error) {
	var f failure
	var top map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return f, errs.Errorf(errs.InvalidRequest, "body is not JSON: send the Error Trigger item as is")
	}
	// Tolerate the shapes an n8n HTTP Request node may produce: a one-item
	// array, or the item wrapped as {"json": {...}}.
	if arr, ok := v.([]any); ok && len(arr) == 1 {
		v = arr[0]
	}
	top, _ = v.(map[string]any)
	if inner, ok := top["json"].(map[string]any); ok && top["execution"] == nil && top["trigger"] == nil {
		top = inner
	}
	exec, isExec := top["execution"].(map[string]any)
	trig, isTrig := top["trigger"].(map[string]any)
	if !isExec && !isTrig {
		return f, &errs.Error{Code: errs.InvalidRequest,
			Message: "body is not an n8n Error Trigger item: it needs an \"execution\" or a \"trigger\" object (post the Error Trigger's output as is)",
			Fields:  []errs.FieldError{{Field: "execution", Rule: "required_without=trigger"}}}
	}
	wf, _ := top["workflow"].(map[string]any)
	f.WorkflowID = clean(str(wf["id"]), maxNameRunes)
	f.WorkflowName = clean(str(wf["name"]), maxNameRunes)

	var errObj map[string]any
	if isExec {
		f.Variant = "execution"
		f.ExecutionID = clean(str(exec["id"]), maxNameRunes)
		f.ExecutionURL = safeURL(str(exec["url"]))
		f.Mode = clean(str(exec["mode"]), 40)
		f.RetryOf = clean(str(exec["retryOf"]), maxNameRunes)
		f.Node = clean(str(exec["lastNodeExecuted"]), maxNameRunes)
		errObj, _ = exec["error"].(map[string]any)
	} else {
		f.Variant = "trigger"
		f.Mode = clean(str(trig["mode"]), 40)
		errObj, _ = trig["error"].(map[string]any)
	}
	if errObj != nil {
		f.ErrorName = clean(str(errObj["name"]), 80)
		f.HTTPCode = clean(str(errObj["httpCode"]), 10)
		f.Message = clean(str(errObj["message"]), maxMessageRunes)
		f.Description = clean(str(errObj["description"]), maxMessageRunes)
		if node, ok := errObj["node"].(map[string]any); ok {
			if f.Node == "" {
				f.Node = clean(str(node["name"]), maxNameRunes)
			}
			f.NodeType = clean(str(node["type"]), 80)
		}
		if f.Message == "" {
			if cause, ok := errObj["cause"].(map[string]any); ok {
				f.Message = clean(str(cause["message"]), maxMessageRunes)
			}
		}
	}
	if f.Description == f.Message {
		f.Description = ""
	}
	return f, nil
}

// str renders a scalar JSON value; objects and arrays are not text.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

// safeURL keeps an http(s) URL without credentials or query (Slack refuses
// a button with a bad URL, and a query may carry a token).
func safeURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(s) > 2000 {
		return ""
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// groupOf names the group of a failure: same kind, workflow, node and
// normalised message.
func groupOf(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "g_" + hex.EncodeToString(h.Sum(nil)[:8])
}

func (f failure) group() string {
	wf := f.WorkflowID
	if wf == "" {
		wf = f.WorkflowName
	}
	// n8n's HTTP errors carry one boilerplate message per status class; the
	// cause is in the description and the status code.
	return groupOf(string(KindWorkflowFailed), wf, f.Node, f.ErrorName, f.HTTPCode,
		normalizeMessage(f.Message), normalizeMessage(f.Description))
}
