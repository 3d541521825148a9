package n8n

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// OffWatch notices workflows that hold a guarded write and stop running:
// n8n turns a workflow off (unpublishes it; 1.x: deactivates it) after
// repeated crashed executions, without running its error workflow (n8n
// issues #37186, #37473), so nothing reaches the guard and the write
// simply stops. It reads n8n's workflow list, page by page, every
// Interval (a few minutes: one list call a page, nothing per workflow but
// at its first look), and tells the workflow's owner once per time off.
//
// Its fields are written by Run's goroutine only (Poll is not safe for
// concurrent use).
type OffWatch struct {
	Client *Client
	// Tell tells the workflow's owner (notify.Service.TellWorkflowOff);
	// an error makes the next poll try again.
	Tell func(context.Context, Off) error
	// Interval between two reads of the list (default DefaultOffInterval).
	Interval time.Duration
	Logger   *slog.Logger

	on      map[string]bool // workflow id → running at the last read
	started bool            // a first read succeeded
	failing string          // the error last logged, "" after a good read
}

// DefaultOffInterval is how often OffWatch reads n8n's workflow list.
const DefaultOffInterval = 5 * time.Minute

// Off is one workflow that holds a guarded write and is off.
type Off struct {
	WorkflowID, WorkflowName string
	Node                     string // a node that reserves with the guard
	// Episode tells one time off from the next: n8n's updatedAt of the
	// workflow as it was turned off.
	Episode string
	Text    string // what happened and what to do
}

// Run polls until ctx ends.
func (w *OffWatch) Run(ctx context.Context) {
	t := time.NewTicker(cmp.Or(w.Interval, DefaultOffInterval))
	defer t.Stop()
	for {
		_ = w.Poll(ctx) // Poll logs what went wrong, once
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Poll reads the list once and tells of every guarded workflow that went
// off since the last read; at the first read, of those off already that
// n8n ran on their triggers before (a guard started after n8n turned one
// off still tells of it; one never published, such as an example, is
// not told of). The owner hears of each time off once (Off.Episode), also
// across restarts and from several replicas.
func (w *OffWatch) Poll(ctx context.Context) error {
	log := cmp.Or(w.Logger, slog.Default())
	all, err := w.Client.Workflows(ctx, Filter{})
	if err != nil {
		if msg := err.Error(); msg != w.failing {
			w.failing = msg
			log.Warn("workflows n8n turns off are not watched while n8n's workflow list cannot be read; trying again", "every", cmp.Or(w.Interval, DefaultOffInterval).String(), "error", msg)
		}
		return err
	}
	if w.failing != "" {
		w.failing = ""
		log.Info("n8n's workflow list is read again: workflows n8n turns off are watched")
	}
	if w.on == nil {
		w.on = map[string]bool{}
	}
	seen := map[string]bool{}
	var errs []error
	firstLookFailed := false
	for _, wf := range all {
		writes := wf.GuardedWrites()
		if wf.IsArchived || len(writes) == 0 {
			continue
		}
		seen[wf.ID] = true
		on := wf.Published()
		was, known := w.on[wf.ID]
		w.on[wf.ID] = on
		if on || (known && !was) {
			continue
		}
		if !known {
			if w.started {
				continue // new, and never run: nothing stopped
			}
			ran, err := w.Client.ProductionRuns(ctx, wf.ID)
			var ne *Error
			if errors.As(err, &ne) && ne.Status/100 == 4 {
				log.Warn("a workflow holding a guarded write is off; whether n8n ran it before cannot be read (the API key needs execution:list), so its owner is not told: `n8n-guard n8n check` lists it",
					"workflow_id", wf.ID, "workflow", wf.Name, "error", err.Error())
				continue
			}
			if err != nil {
				delete(w.on, wf.ID) // looked at again at the next read, still a first look
				firstLookFailed = true
				errs = append(errs, err)
				continue
			}
			if !ran {
				continue
			}
		}
		off := Off{WorkflowID: wf.ID, WorkflowName: wf.Name, Node: writes[0], Episode: wf.UpdatedAt,
			Text: fmt.Sprintf("n8n turned off workflow %q (%s), which holds a guarded write (%q): its writes stop, and no error workflow runs for this. n8n turns a workflow off after repeated crashed executions. Open its last executions in n8n, fix the crash, then publish it again (n8n 1.x: activate it).",
				wf.Name, wf.ID, writes[0])}
		if err := w.Tell(ctx, off); err != nil {
			w.on[wf.ID] = true // seen going off again at the next read
			errs = append(errs, fmt.Errorf("tell of workflow %s off: %w", wf.ID, err))
			continue
		}
		log.Warn("n8n turned off a workflow holding a guarded write; its owner is told", "workflow_id", wf.ID, "workflow", wf.Name, "node", writes[0])
	}
	for id := range w.on {
		if !seen[id] {
			delete(w.on, id)
		}
	}
	w.started = w.started || !firstLookFailed
	if err := errors.Join(errs...); err != nil {
		log.Warn("workflows n8n turned off: not every owner could be told; trying again at the next read", "error", err.Error())
		return err
	}
	return nil
}
