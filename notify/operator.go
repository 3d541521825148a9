package notify

import (
	"context"
	"slices"

	"github.com/n8n-guard/n8n-guard/errs"
)

// What the console (and the API) ask of the service outside Slack: where
// a notification goes under the current configuration, the messages
// about a key and the failed executions. A decision taken in the console
// goes the buttons' way (notify/decision) so the Slack message shows it.

// Target is where a notification goes: the owner it mentions, the
// channel it is posted to, the runbook it shows.
type Target struct {
	Owner   string `json:"owner"`
	Channel string `json:"channel"`
	Runbook string `json:"runbook"`
}

// targetOf is where r goes under the current configuration. An
// escalation keeps the step's target it was made for.
func (c Config) targetOf(r *Record) Target {
	if r.Kind == KindEscalation {
		return Target{Owner: r.Owner, Channel: r.Channel, Runbook: r.Runbook}
	}
	rt := c.routeFor(r)
	return Target{Owner: rt.Owner, Channel: rt.Channel, Runbook: rt.Runbook}
}

// KeyRoute is who hears about a stuck key of namespace now: its owner,
// channel and runbook, the defaults filling what its rule leaves empty.
func (s *Service) KeyRoute(namespace string) Target {
	rt := s.cfg.forRoute(s.cfg.Namespaces, namespace)
	return Target{Owner: rt.Owner, Channel: rt.Channel, Runbook: rt.Runbook}
}

// DestinationRoute is who hears about a destination's breaker now: its
// owner, channel and runbook, the defaults filling what its rule leaves
// empty.
func (s *Service) DestinationRoute(destination string) Target {
	rt := s.cfg.forRoute(s.cfg.Destinations, destination)
	return Target{Owner: rt.Owner, Channel: rt.Channel, Runbook: rt.Runbook}
}

// Approvers are who may decide a namespace's approvals from Slack: its
// approvers, else its owner and resolvers.
func (s *Service) Approvers(namespace string) []string {
	rt := s.cfg.approvalRoute(namespace)
	if len(s.cfg.Namespaces[namespace].Approvers) > 0 {
		return slices.Clone(rt.Resolvers)
	}
	out := []string{}
	if rt.Owner != "" {
		out = append(out, rt.Owner)
	}
	for _, r := range rt.Resolvers {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// ResendPlan says what a re-send of a notification would do: the
// notification as it stands and where it would go now.
type ResendPlan struct {
	Notification
	To Target
}

// PlanResend is the confirmation step of a re-send: where the dead
// notification id would go under the current configuration. Nothing
// changes.
func (s *Service) PlanResend(ctx context.Context, id string) (ResendPlan, error) {
	if !idRE.MatchString(id) {
		return ResendPlan{}, &errs.Error{Code: errs.InvalidRequest, Message: "id is not a notification id (n_…)",
			Fields: []errs.FieldError{{Field: "id", Rule: "notification_id"}}}
	}
	r, err := s.outbox.Get(ctx, id)
	if err != nil {
		return ResendPlan{}, err
	}
	if r == nil {
		return ResendPlan{}, errs.Errorf(errs.NotFound, "no notification %s", id)
	}
	return ResendPlan{Notification: r.Item(), To: s.cfg.targetOf(r)}, nil
}

// AboutKey is the newest message about a key (nil: none was made).
func (s *Service) AboutKey(ctx context.Context, namespace, key string) (*Record, error) {
	rs, err := s.outbox.AboutKey(ctx, namespace, key, 1)
	if err != nil || len(rs) == 0 {
		return nil, err
	}
	return rs[0], nil
}

// FailurePage is one page of failed executions, newest first.
type FailurePage struct {
	Items []*Record
	// NextCursor continues the walk ("" at the end).
	NextCursor string
}

// failureScan bounds the notifications one page of failures reads: they
// are kept beside the other kinds, newest first.
const failureScan = 2000

// Failures lists the failed executions n8n's error workflow reported
// (kind workflow_failed), newest first, up to limit, from cursor on.
func (s *Service) Failures(ctx context.Context, cursor string, limit int) (FailurePage, error) {
	if cursor != "" && !idRE.MatchString(cursor) {
		return FailurePage{}, &errs.Error{Code: errs.InvalidRequest, Message: "cursor is not one this server gave out",
			Fields: []errs.FieldError{{Field: "cursor", Rule: "cursor"}}}
	}
	var out FailurePage
	for read := 0; read < failureScan; {
		page, err := s.outbox.List(ctx, ListQuery{Limit: 200, Cursor: cursor})
		if err != nil {
			return FailurePage{}, err
		}
		for _, n := range page.Items {
			read++
			cursor = n.ID
			if n.Kind != KindWorkflowFailed {
				continue
			}
			r, err := s.outbox.Get(ctx, n.ID)
			if err != nil {
				return FailurePage{}, err
			}
			if r == nil {
				continue // purged meanwhile
			}
			out.Items = append(out.Items, r)
			if len(out.Items) == limit {
				out.NextCursor = n.ID
				return out, nil
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
	out.NextCursor = cursor
	return out, nil
}
