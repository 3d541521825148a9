package n8nsetup

import (
	"testing"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// What `n8n guard` writes into a workflow (the HTTP templates, with and
// without parking, and the community node) uses nothing n8n 3.0 removed
// and no Code node that may outrun 3.x's 60 s task-runner timeout.
func TestGuardWritesNothingN8n3Removed(t *testing.T) {
	park := spec("Post order", "'batch-' + $json.id")
	park.Park = true
	for _, c := range []struct {
		name string
		file string
		sp   GuardSpec
	}{
		{"HTTP templates", "webhook-post.json", spec("Create contact", "$json.body.event_id")},
		{"HTTP templates, parking", "schedule-split-post.json", park},
		{"community node", "webhook-post.json", communitySpec("Create contact", "$json.body.event_id")},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := guardAll(t, unguarded(t, c.file), c.sp)
			for _, p := range workflows.N8n3Problems(s.Nodes) {
				t.Error(p)
			}
		})
	}
}
