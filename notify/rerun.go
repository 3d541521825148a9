package notify

import (
	"context"
	"fmt"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// Re-runs from Slack. n8n's retry of an execution guarded by `n8n guard`
// continues at its re-run gate, which refuses until a person allows the
// re-run: a plain retry would fail there again. So "Retry execution" on
// such an execution allows the re-run of its keys waiting at the gate
// (keystore's resolve with rerun, as the console's "allow a retry and
// re-run") and wakes the guard's re-run worker (Options.Reruns), which
// asks n8n to retry the execution once for all of them.

// rerunAtGate allows the re-run of r's execution when keys of it wait at
// its re-run gate, or were allowed already. guarded: so it is, and the
// person's answer (or the refusal) is said; else n8n's plain retry
// follows.
func (s *Service) rerunAtGate(ctx context.Context, r *Record, c Click) (guarded bool, answer, refusal string) {
	if s.opts.Reruns == nil || s.opts.Keys == nil || r.WorkflowID == "" || r.ExecutionID == "" {
		return false, "", ""
	}
	owner := "n8n " + r.WorkflowID + " exec " + r.ExecutionID // as the gate's reserve names it
	waiting, granted, err := s.keysAtGate(ctx, owner)
	if err != nil {
		s.log.Warn("listing the keys at an execution's re-run gate failed", "execution", r.ExecutionID, "err", err)
		return true, "", "n8n-guard could not read the execution's keys (its store failed); nothing changed. Try again."
	}
	if len(waiting) == 0 && granted == 0 {
		return false, "", ""
	}
	allowed := granted
	for _, k := range waiting {
		_, err := s.opts.Keys.Resolve(ctx, keystore.ResolveRequest{Namespace: k.Namespace, Key: k.Key,
			Resolution: keystore.StateFailed, Rerun: true, By: c.by(), Note: "re-run from Slack"})
		switch {
		case errs.CodeOf(err) == errs.Conflict:
			// Decided meanwhile (its sender, a person): no longer at the gate.
		case err != nil:
			s.log.Warn("allowing a re-run from Slack failed", "namespace", k.Namespace, "key", k.Key, "err", err)
		default:
			allowed++ // a repeat (Replayed) is allowed as well
		}
	}
	if allowed == 0 {
		return true, "", "n8n-guard could not allow the re-run of execution " + EscapeMrkdwn(r.ExecutionID) + " (see its log); nothing changed."
	}
	s.opts.Reruns.Kick()
	events := fmt.Sprintf("%d events", allowed)
	if allowed == 1 {
		events = "1 event"
	}
	return true, fmt.Sprintf("Re-run allowed for %s; the guard re-runs execution %s.", events, EscapeMrkdwn(r.ExecutionID)), ""
}

// keysAtGate lists the failed keys of the execution owner that wait at
// its re-run gate, and counts those whose re-run was allowed already.
func (s *Service) keysAtGate(ctx context.Context, owner string) (waiting []*keystore.Record, granted int, err error) {
	q := keystore.ListQuery{Owner: owner, State: keystore.StateFailed, Limit: 1000}
	for {
		page, err := s.opts.Keys.List(ctx, q)
		if err != nil {
			return nil, 0, err
		}
		for _, k := range page.Items {
			if keystore.RerunHolder(k) == owner {
				waiting = append(waiting, k)
			} else if h, ok := keystore.RerunGranted(k); ok && h == owner {
				granted++
			}
		}
		if page.NextCursor == "" {
			return waiting, granted, nil
		}
		q.Cursor = page.NextCursor
	}
}
