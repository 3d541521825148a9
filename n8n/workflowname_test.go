package n8n

import (
	"context"
	"strings"
	"testing"
)

func TestWorkflowName(t *testing.T) {
	srv := fakeN8n(t, map[string]answer{
		"GET /api/v1/workflows/LeadCrm00000001": {200, `{"id":"LeadCrm00000001","name":"Lead to CRM","nodes":[]}`},
		"GET /api/v1/workflows/gone":            {404, `{"message":"Not Found"}`},
	})
	c := New(srv.URL, "key", 0)
	if name, err := c.WorkflowName(context.Background(), "LeadCrm00000001"); err != nil || name != "Lead to CRM" {
		t.Fatalf("name %q, %v", name, err)
	}
	if _, err := c.WorkflowName(context.Background(), "gone"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a deleted workflow: %v", err)
	}
}
