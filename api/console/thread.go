package console

import (
	"context"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/notify"
)

// One thread from n8n to Slack to the console: the key page names the n8n
// execution that holds (or held) the lease and links to it in n8n, and
// links the person who owns the key's alerts, the runbook, the Slack
// message about the key and the destination's breaker.

// Thread is what the console asks of the notifications beyond their list,
// passed as Config.Thread: the routes, approvers, AboutKey, PlanResend and
// Failures are notify.Service's; DecideFailure is notify/decision's
// Decider, which carries out a person's decisions.
type Thread interface {
	// KeyRoute: who hears about a namespace's stuck keys now.
	KeyRoute(namespace string) notify.Target
	// DestinationRoute: who hears about a destination's breaker now.
	DestinationRoute(destination string) notify.Target
	// Approvers: who may decide a namespace's approvals.
	Approvers(namespace string) []string
	// AboutKey: the newest message about a key (nil: none).
	AboutKey(ctx context.Context, namespace, key string) (*notify.Record, error)
	// PlanResend: where a re-send would go now; nothing changes.
	PlanResend(ctx context.Context, id string) (notify.ResendPlan, error)
	// Failures: the failed executions, newest first.
	Failures(ctx context.Context, cursor string, limit int) (notify.FailurePage, error)
	// DecideFailure: acknowledge or snooze a failed execution, as its
	// Slack buttons do.
	DecideFailure(ctx context.Context, id, action, by string) (*notify.Record, error)
}

// holder is the n8n execution a lease holder names: the shipped
// templates write "n8n <workflow id> exec <execution id>", the community
// node "n8n execution <execution id>". Anything else is a holder's own
// words, shown as they are.
type holder struct {
	Text        string // as the reserve gave it
	WorkflowID  string // "" when the holder does not say
	ExecutionID string // "" when it is not an n8n execution
}

var holderRE = regexp.MustCompile(`(?i)^n8n\s+(?:([A-Za-z0-9_-]{1,64})\s+)?exec(?:ution)?\s*[:#]?\s*([A-Za-z0-9_-]{1,64})$`)

func parseHolder(s string) holder {
	h := holder{Text: s}
	m := holderRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return h
	}
	if strings.EqualFold(m[1], "execution") || strings.EqualFold(m[1], "exec") {
		m[1] = ""
	}
	h.WorkflowID, h.ExecutionID = m[1], m[2]
	return h
}

// n8nLinks are the n8n pages of a holder: the execution and its
// workflow, or (the workflow unknown: n8n has no page for an execution
// without its workflow's id) the executions list.
type n8nLinks struct {
	Execution, Workflow, Executions string
}

// n8nLinksOf builds the links on n8n's address base ("" : none). The
// paths are the same in n8n 1.x and 2.x.
func n8nLinksOf(base string, h holder) n8nLinks {
	if base == "" || h.ExecutionID == "" {
		return n8nLinks{}
	}
	var l n8nLinks
	if h.WorkflowID != "" {
		wf := base + "/workflow/" + url.PathEscape(h.WorkflowID)
		l.Workflow, l.Execution = wf, wf+"/executions/"+url.PathEscape(h.ExecutionID)
		return l
	}
	l.Executions = base + "/home/executions"
	return l
}

// n8nBase is the n8n address links point at: the configured one, else
// the one a parked key's resume URL shows ("": unknown).
func (ui *Console) n8nBase(r *keystore.Record) string {
	if ui.n8nURL != "" {
		return ui.n8nURL
	}
	if r == nil || r.ResumeURL == "" {
		return ""
	}
	u, err := url.Parse(r.ResumeURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	for _, root := range []string{"/webhook-waiting/", "/form-waiting/"} {
		if i := strings.Index(u.Path, root); i >= 0 {
			return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path[:i]}).String()
		}
	}
	return ""
}

// keyThread is what the key page links to.
type keyThread struct {
	Holder holder
	// WorkflowName as n8n says it ("" : not asked, or n8n did not say).
	WorkflowName string
	n8nLinks
	// Owner is the person (or group) who hears about the key's namespace,
	// OwnerURL their Slack profile or mail ("" : shown as text).
	Owner, OwnerURL string
	Channel         string
	// Runbook as configured; RunbookURL when it is a web address.
	Runbook, RunbookURL string
	// SlackURL opens the message about the key (its channel when the
	// workspace is unknown), SlackWhat says which.
	SlackURL, SlackWhat string
	// BreakerURL is the destination's page.
	BreakerURL string
}

func (ui *Console) keyThread(ctx context.Context, r *keystore.Record) keyThread {
	t := keyThread{Holder: parseHolder(r.Owner)}
	t.n8nLinks = n8nLinksOf(ui.n8nBase(r), t.Holder)
	t.WorkflowName = ui.workflowNames.name(ctx, t.Holder.WorkflowID, ui.now())
	if r.Destination != "" {
		t.BreakerURL = destinationURL(r.Destination)
	}
	if ui.thread == nil {
		return t
	}
	rt := ui.thread.KeyRoute(r.Namespace)
	t.Owner, t.Channel, t.Runbook = rt.Owner, rt.Channel, rt.Runbook
	t.OwnerURL = ui.personURL(rt.Owner)
	t.RunbookURL = webURL(rt.Runbook)
	msg, err := ui.thread.AboutKey(ctx, r.Namespace, r.Key)
	if err != nil {
		ui.log.Warn("console: the messages about a key could not be read", "namespace", r.Namespace, "key", r.Key, "err", err)
	}
	if msg != nil && msg.SlackChannel != "" && msg.SlackTS != "" {
		t.SlackURL, t.SlackWhat = ui.slackMessageURL(msg.SlackChannel, msg.SlackTS)
	}
	return t
}

// slackMessageURL is the permalink of a message (the workspace known),
// else Slack's redirect to its channel.
func (ui *Console) slackMessageURL(channel, ts string) (link, what string) {
	if ui.slackWorkspace == "" {
		return "https://slack.com/app_redirect?" + url.Values{"channel": {channel}}.Encode(), "its channel"
	}
	return ui.slackWorkspace + "/archives/" + url.PathEscape(channel) + "/p" + strings.ReplaceAll(ts, ".", ""), "the message"
}

var slackUserRE = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)

// personURL: a Slack user's profile (the workspace known), an e-mail's
// mailto; "" for the rest (a user group, no workspace).
func (ui *Console) personURL(owner string) string {
	switch {
	case slackUserRE.MatchString(owner) && ui.slackWorkspace != "":
		return ui.slackWorkspace + "/team/" + owner
	case strings.Contains(owner, "@"):
		if a, err := mail.ParseAddress(owner); err == nil && a.Address == owner {
			return "mailto:" + owner
		}
	}
	return ""
}

// webURL is s when it is an http(s) address, else "".
func webURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

// SlackWorkspaceURL is the address of a Slack workspace given as its
// name ("acme"), host ("acme.slack.com") or URL; "" for "".
func SlackWorkspaceURL(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	switch {
	case s == "":
		return ""
	case strings.HasPrefix(s, "https://"), strings.HasPrefix(s, "http://"):
		return s
	case strings.Contains(s, "."):
		return "https://" + s
	}
	return "https://" + s + ".slack.com"
}

// workflowNames asks n8n the names of holders' workflows, each at most
// every workflowNameTTL; a page waits at most workflowNameWait for it.
type workflowNames struct {
	ask  func(ctx context.Context, id string) (string, error)
	mu   sync.Mutex
	seen map[string]workflowName
}

type workflowName struct {
	name string
	at   time.Time
}

const (
	workflowNameTTL  = 10 * time.Minute
	workflowNameWait = 2 * time.Second
	workflowNamesMax = 1000
)

func newWorkflowNames(ask func(context.Context, string) (string, error)) *workflowNames {
	return &workflowNames{ask: ask, seen: map[string]workflowName{}}
}

// name is workflow id's name, "" when n8n is not asked or did not say (a
// deleted workflow, n8n down: the page shows the id).
func (w *workflowNames) name(ctx context.Context, id string, now time.Time) string {
	if w.ask == nil || id == "" {
		return ""
	}
	w.mu.Lock()
	got, ok := w.seen[id]
	w.mu.Unlock()
	if ok && now.Sub(got.at) < workflowNameTTL {
		return got.name
	}
	ctx, cancel := context.WithTimeout(ctx, workflowNameWait)
	defer cancel()
	name, err := w.ask(ctx, id)
	if err != nil {
		name = "" // remembered too: a missing workflow is not asked for on every view
	}
	w.mu.Lock()
	if len(w.seen) >= workflowNamesMax {
		clear(w.seen)
	}
	w.seen[id] = workflowName{name: name, at: now}
	w.mu.Unlock()
	return name
}
