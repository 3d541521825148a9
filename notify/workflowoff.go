package notify

import (
	"context"
	"fmt"
)

// WorkflowOff is a workflow holding guarded writes that n8n turned off
// (not published; 1.x: not active), as the guard's watch of n8n's
// workflow list saw it (n8n.OffWatch).
type WorkflowOff struct {
	WorkflowID, WorkflowName string
	// Text says what happened, which guarded write stops and what to do.
	Text string
	// Episode tells one time off from the next (n8n's updatedAt of the
	// workflow): the owner hears of each once, from every replica and
	// across restarts.
	Episode string
}

// errorNameWorkflowOff marks the failure as a workflow n8n turned off, for
// the message and GET /v1/notifications (error_name).
const errorNameWorkflowOff = "WorkflowTurnedOff"

// TellWorkflowOff tells the workflow's owner (the owners rules, as for its
// failed executions) once per episode that n8n turned it off. No error
// workflow runs when n8n does that, so without this nobody hears of it.
func (s *Service) TellWorkflowOff(ctx context.Context, w WorkflowOff) (Accepted, error) {
	now := s.now()
	rt := s.cfg.forWorkflow(w.WorkflowID, w.WorkflowName)
	// No node: none failed (the message would say "failed at node").
	f := failure{Failure: Failure{WorkflowID: clean(w.WorkflowID, maxNameRunes), WorkflowName: clean(w.WorkflowName, maxNameRunes),
		ErrorName: errorNameWorkflowOff}, Message: clean(w.Text, maxMessageRunes)}
	rec := &Record{
		Header: Header{ID: newID(now), Kind: KindWorkflowFailed, Status: StatusPending, Group: f.group(),
			Count: 1, FirstAt: now, LastAt: now, CreatedAt: now,
			Owner: rt.Owner, Channel: rt.Channel, Runbook: rt.Runbook, Message: f.Message},
		Delivery: Delivery{DueAt: now},
		Failure:  f.Failure,
	}
	rec.EscalateAt = firstEscalation(rt, now)
	once := fmt.Sprintf("%s\x00%s\x00%s", errorNameWorkflowOff, w.WorkflowID, w.Episode)
	res, err := s.outbox.Add(ctx, []Addition{{Record: rec, Once: once}}, nil)
	if err != nil {
		return Accepted{}, fmt.Errorf("store notification: %w", err)
	}
	a := res[0]
	if a.Skipped || a.Record == nil { // told before (Once)
		return Accepted{Status: "skipped"}, nil
	}
	s.poke()
	s.m.accepted.WithLabelValues(string(KindWorkflowFailed), "queued").Inc()
	return Accepted{NotificationID: a.Record.ID, Group: a.Record.Group, Owner: a.Record.Owner, Status: "queued"}, nil
}
