package notify

import (
	"cmp"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
)

// Defaults of the notify configuration.
const (
	defaultGroupWindow = 5 * time.Minute
	defaultRetention   = 30 * 24 * time.Hour
	defaultSlackPause  = 5 * time.Minute
	// defaultFirstPause is the first pause once Slack is unreachable (±20 %
	// jitter: 10–15 s); each further failed probe doubles it up to
	// SlackPause, and any answer of Slack resets it.
	defaultFirstPause = 12500 * time.Millisecond
	// defaultRetryFor: transient Slack failures are retried this long
	// after a notification was created; never dropped after a count.
	defaultRetryFor = 7 * 24 * time.Hour
)

// Config says who hears about what. The binary maps the YAML file's
// notify:, owners:, namespaces: and destinations: sections into it.
type Config struct {
	DefaultChannel string
	DefaultOwner   string
	// DefaultRunbook is the next step shown when no rule gives one.
	DefaultRunbook string
	// GroupWindow: identical failures inside it form one group (one
	// message); default defaultGroupWindow, 5 min.
	GroupWindow time.Duration
	// Owners are tried in order; the first whose glob matches the workflow's
	// name or id wins.
	Owners []OwnerRule
	// Namespaces route key_unknown alerts, Destinations breaker alerts.
	Namespaces   map[string]Route
	Destinations map[string]Route
	// Retention: how long delivered (and dead) notifications are kept
	// (default defaultRetention, 30 days).
	Retention time.Duration
	// SlackPause: the longest delivery pauses while Slack stays
	// unreachable (default defaultSlackPause, 5 min; the first pause is
	// defaultFirstPause, or SlackPause if shorter).
	SlackPause time.Duration
	// RetryFor: how long transient Slack failures (5xx, timeouts, refused
	// connections, 429) are retried; a notification is dead only after it
	// (default defaultRetryFor, 7 days).
	RetryFor time.Duration
	// GuardURL is the base URL people use to reach n8n-guard, shown in the
	// exact resolve call of a stuck key. Empty: "$N8N_GUARD_URL".
	GuardURL string
	// PublicURL is the guard's address as people open it in a browser
	// (public_url): every message links to its console page under it.
	// Empty: messages have no console links.
	PublicURL string
}

// OwnerRule routes failed executions of matching workflows.
type OwnerRule struct {
	Workflow string // glob on the workflow's name or id
	Owner    string // U… user, S… user group, or an e-mail resolved via Slack
	Channel  string
	Runbook  string
	Deadline time.Duration // 4h → "by 14:00 UTC" (from the failure)
	Deciders
}

// Route says who hears about a namespace's stuck keys or a destination's
// breaker.
type Route struct {
	Owner   string
	Channel string
	Runbook string
	Deciders
	// Approvers: a namespace that requires approval sends each request to
	// them, and only they (and its escalation steps) may decide it
	// (approval.go).
	Approvers []string
}

// Deciders say who may act on a message from Slack and who hears next
// when nobody does.
type Deciders struct {
	// Resolvers may press the buttons besides the owner: U… users and S…
	// user groups (membership is asked of Slack at the click).
	Resolvers []string
	// Escalation: when nobody acknowledged the message After the first
	// failure (cumulative), it goes To the step's target: a U… user, an
	// S… user group or a C… channel. Each step fires at most once.
	Escalation []EscalationStep
}

var (
	userIDRE    = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	groupIDRE   = regexp.MustCompile(`^S[A-Z0-9]{2,}$`)
	channelIDRE = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	// Only for owners from the config; payload text uses the redactor.
	ownerEmailRE = regexp.MustCompile(`^[^\s@<>]+@[^\s@<>]+\.[A-Za-z]{2,}$`)
)

// withDefaults fills in the defaults (the one place they are applied)
// and checks what can be checked without Slack.
func (c Config) withDefaults() (Config, error) {
	// A zero or negative duration is the default.
	c.GroupWindow = cmp.Or(max(c.GroupWindow, 0), defaultGroupWindow)
	c.Retention = cmp.Or(max(c.Retention, 0), defaultRetention)
	c.SlackPause = cmp.Or(max(c.SlackPause, 0), defaultSlackPause)
	c.RetryFor = cmp.Or(max(c.RetryFor, 0), defaultRetryFor)
	c.GuardURL = strings.TrimRight(c.GuardURL, "/")
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if err := CheckPublicURL(c.PublicURL); err != nil {
		return c, err
	}
	if err := checkOwner("notify.default_owner", c.DefaultOwner); err != nil {
		return c, err
	}
	for i, r := range c.Owners {
		where := fmt.Sprintf("owners[%d]", i)
		if r.Workflow == "" {
			return c, fmt.Errorf("%s: workflow glob is empty", where)
		}
		if _, err := path.Match(r.Workflow, ""); err != nil {
			return c, fmt.Errorf("%s: workflow glob %q: %w", where, r.Workflow, err)
		}
		if err := checkOwner(where+".owner", r.Owner); err != nil {
			return c, err
		}
		if r.Deadline < 0 {
			return c, fmt.Errorf("%s: deadline must not be negative", where)
		}
		if err := r.Deciders.check(where); err != nil {
			return c, err
		}
	}
	for ns, r := range c.Namespaces {
		if err := checkOwner("namespaces."+ns+".owner", r.Owner); err != nil {
			return c, err
		}
		if err := r.Deciders.check("namespaces." + ns); err != nil {
			return c, err
		}
	}
	for d, r := range c.Destinations {
		if err := checkOwner("destinations."+d+".owner", r.Owner); err != nil {
			return c, err
		}
		if len(r.Resolvers) > 0 || len(r.Escalation) > 0 {
			// Breaker alerts carry no buttons: nobody could acknowledge, and
			// the breaker closing ends the matter on its own.
			return c, fmt.Errorf("destinations.%s: breaker alerts have no buttons and do not escalate; resolvers and escalation belong on namespaces and owners rules", d)
		}
	}
	return c, nil
}

func (d Deciders) check(where string) error {
	for i, r := range d.Resolvers {
		if !userIDRE.MatchString(r) && !groupIDRE.MatchString(r) {
			return fmt.Errorf("%s.resolvers[%d]: %q is neither a Slack user ID (U…) nor a user group ID (S…)", where, i, r)
		}
	}
	var last time.Duration
	for i, st := range d.Escalation {
		at := fmt.Sprintf("%s.escalation[%d]", where, i)
		if st.After <= last {
			return fmt.Errorf("%s.after: must be positive and later than the step before", at)
		}
		last = st.After
		if !userIDRE.MatchString(st.To) && !groupIDRE.MatchString(st.To) && !channelIDRE.MatchString(st.To) {
			return fmt.Errorf("%s.to: %q is neither a Slack user (U…), a user group (S…) nor a channel ID (C…)", at, st.To)
		}
	}
	return nil
}

func checkOwner(where, owner string) error {
	if owner == "" || userIDRE.MatchString(owner) || groupIDRE.MatchString(owner) || ownerEmailRE.MatchString(owner) {
		return nil
	}
	return fmt.Errorf("%s: %q is neither a Slack user ID (U…), a user group ID (S…) nor an e-mail address", where, owner)
}

// route is where one notification goes, decided at intake and stored with it.
type route struct {
	Owner    string
	Channel  string
	Runbook  string
	Deadline time.Duration
	Deciders
}

// forWorkflow picks the first rule whose glob matches the workflow's name or
// id; the defaults fill what the rule leaves empty.
func (c Config) forWorkflow(id, name string) route {
	for _, rule := range c.Owners {
		if globMatch(rule.Workflow, name) || globMatch(rule.Workflow, id) {
			r := c.routeOf(rule.Owner, rule.Channel, rule.Runbook)
			r.Deadline, r.Deciders = rule.Deadline, rule.Deciders
			return r
		}
	}
	return c.routeOf("", "", "")
}

// forRoute is the route configured under name in m, the defaults filling
// what it leaves empty.
func (c Config) forRoute(m map[string]Route, name string) route {
	x := m[name]
	r := c.routeOf(x.Owner, x.Channel, x.Runbook)
	r.Deciders = x.Deciders
	return r
}

// routeOf fills what owner, channel and runbook leave empty with the
// defaults.
func (c Config) routeOf(owner, channel, runbook string) route {
	return route{Owner: cmp.Or(owner, c.DefaultOwner), Channel: cmp.Or(channel, c.DefaultChannel),
		Runbook: cmp.Or(runbook, c.DefaultRunbook)}
}

func globMatch(pattern, s string) bool {
	if s == "" {
		return false
	}
	ok, _ := path.Match(pattern, s)
	return ok
}

// routeFor is the route of a stored notification under the current
// configuration: who may decide and where it escalates follow the config
// file, also for messages sent before it changed.
func (c Config) routeFor(r *Record) route {
	switch r.Kind {
	case KindKeyUnknown, KindParkedLost, KindParkedOverdue, KindRecordDamaged, KindRerunRefused:
		return c.forRoute(c.Namespaces, r.Namespace)
	case KindBreakerOpened, KindBreakerClosed:
		return c.forRoute(c.Destinations, r.Destination)
	case KindApproval:
		return c.approvalRoute(r.Namespace)
	}
	return c.forWorkflow(r.WorkflowID, r.WorkflowName)
}
