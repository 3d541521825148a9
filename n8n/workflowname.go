package n8n

import (
	"context"
	"net/http"
	"net/url"
)

// WorkflowName is the name of workflow id, for the console, which links a
// lease's holder to its workflow by name (GET /api/v1/workflows/{id},
// the same path in 1.x and 2.x).
func (c *Client) WorkflowName(ctx context.Context, id string) (string, error) {
	var w struct {
		Name string `json:"name"`
	}
	err := c.Do(ctx, http.MethodGet, "/workflows/"+url.PathEscape(id)+"?excludePinnedData=true", nil, &w)
	return w.Name, err
}
