package notify

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// EventSource is where the keystore's events are read (keystore.Store
// satisfies it); its commits wake the worker to read them.
type EventSource interface {
	Events(ctx context.Context, after uint64, limit int) ([]keystore.Event, error)
	keystore.CommitFeed
}

// Keys is the part of the keystore notify reads (keystore.Store
// satisfies it): where a key stands now, to tell a message decided
// elsewhere and where a parked key's execution waits. The decisions
// themselves go through notify/decision.
type Keys interface {
	Lookup(ctx context.Context, namespace, key string) (keystore.Result, error)
}

// Executions retries a failed n8n execution and returns the new
// execution's id ("Retry execution"). Errors it understands are
// *RetryError.
type Executions interface {
	Retry(ctx context.Context, executionID string) (string, error)
	// WorkflowOf is the workflow (id and name) n8n says the execution
	// belongs to: a failure's post names both in words its sender chose
	// (execcheck.go).
	WorkflowOf(ctx context.Context, executionID string) (workflowID, workflowName string, err error)
}

// RetryError is n8n's refusal of a retry.
type RetryError struct {
	Refusal RetryRefusal
	Message string // n8n's words
}

// RetryRefusal says why n8n refused a retry.
type RetryRefusal int

const (
	RetryNotFound     RetryRefusal = iota + 1 // no such execution (or the key may not see it)
	RetryConflict                             // n8n will not retry it now (queued, running)
	RetryUnauthorized                         // the API key is refused
)

func (e *RetryError) Error() string { return "n8n refused the retry: " + e.Message }

// Options are the runtime settings of the service (the Config is what the
// operator writes in the config file).
type Options struct {
	// Outbox is where notifications are kept (notify/bolt, notify/postgres).
	Outbox Outbox
	// Slack delivers (the slack package); nil: notifications are stored
	// and listed, delivery waits (SLACK_BOT_TOKEN is empty).
	Slack Slack
	// Executions enables "Retry execution"; nil: the button is not shown.
	Executions Executions

	Logger     *slog.Logger
	Clock      keystore.Clock
	Registerer prometheus.Registerer // nil: metrics are not registered
	Events     EventSource           // nil: no key/breaker alerts
	// Keys tells whether a key was decided elsewhere and where a parked
	// key's execution waits (nil: neither is looked up).
	Keys Keys
	// Parking: the parked counts shown in the outage messages (nil: the
	// messages show no count and no catch-up).
	Parking Parking

	// PollInterval: how often the worker looks for due notifications and
	// new keystore events (default 1s); intake and the store's commits
	// (Events) also wake it at once, so the interval is the fallback for
	// due times and another guard's commits.
	PollInterval time.Duration
	// PurgeInterval: how often old notifications are purged (default 1h).
	PurgeInterval time.Duration
	// BackoffInitial and BackoffMax shape the exponential backoff with
	// jitter after transient Slack errors (defaults 5s and 10m).
	BackoffInitial time.Duration
	BackoffMax     time.Duration
}

// withDefaults fills in every default of Options, as their comments say:
// the one place they are applied.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	// A zero or negative duration is the default.
	o.PollInterval = cmp.Or(max(o.PollInterval, 0), time.Second)
	o.PurgeInterval = cmp.Or(max(o.PurgeInterval, 0), time.Hour)
	o.BackoffInitial = cmp.Or(max(o.BackoffInitial, 0), 5*time.Second)
	o.BackoffMax = cmp.Or(max(o.BackoffMax, 0), 10*time.Minute)
	return o
}

// Service is the intake and the delivery worker; notify/decision carries
// out the decisions people take on its messages.
type Service struct {
	cfg    Config
	opts   Options
	log    *slog.Logger
	now    keystore.Clock
	outbox Outbox
	slack  Slack // nil when no token is configured
	pause  *slackPause
	wake   chan struct{}
	m      *metrics
	// rounds counts the worker's completed rounds (Rounds); written by the
	// Run goroutine, read by anyone.
	rounds atomic.Uint64

	// Worker state; only the Run goroutine touches it.
	notBefore time.Time // a 429 or a Slack fault pauses every call until then
	transient *backoff.ExponentialBackOff
	lastPurge time.Time
	// lastParkedLook: when the parked counts were last read (outage.go).
	lastParkedLook time.Time
	eventsFault    bool
	usersMu        sync.Mutex
	users          map[string]string // e-mail → user ID ("" when Slack does not know it)
}

// New prepares the service on opts.Outbox.
func New(cfg Config, opts Options) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("notify config: %w", err)
	}
	if opts.Outbox == nil {
		return nil, errors.New("notify: no outbox")
	}
	opts = opts.withDefaults()
	s := &Service{
		cfg: cfg, opts: opts, log: opts.Logger.With("component", "notify"), now: opts.Clock,
		outbox: opts.Outbox, slack: opts.Slack, wake: make(chan struct{}, 1), users: map[string]string{},
	}
	if s.m, err = newMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	s.transient = &backoff.ExponentialBackOff{InitialInterval: min(opts.BackoffInitial, transientPauseMax),
		RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: transientPauseMax}
	s.transient.Reset()
	s.pause = newSlackPause(defaultFirstPause, cfg.SlackPause, func(open bool) {
		// From the first call that got no answer until one gets through.
		s.m.breakerOpen.Set(map[bool]float64{true: 1, false: 0}[open])
	})
	return s, nil
}

// Intake stores one failed execution, the item of n8n's Error Trigger as
// is. It returns once the notification is durable; delivery is the worker's.
func (s *Service) Intake(ctx context.Context, body []byte) (Accepted, error) {
	f, err := parseErrorTrigger(body)
	if err != nil {
		return Accepted{}, err
	}
	now := s.now()
	rt := s.cfg.forWorkflow(f.WorkflowID, f.WorkflowName)
	rec := &Record{
		Header: Header{ID: newID(now), Kind: KindWorkflowFailed, Status: StatusPending, Group: f.group(),
			Count: 1, FirstAt: now, LastAt: now, CreatedAt: now,
			Owner: rt.Owner, Channel: rt.Channel, Runbook: rt.Runbook, Message: f.Message},
		Delivery: Delivery{DueAt: now},
		Failure:  f.Failure,
	}
	if rt.Deadline > 0 {
		d := now.Add(rt.Deadline)
		rec.Deadline = &d
	}
	rec.EscalateAt = firstEscalation(rt, now)
	res, err := s.outbox.Add(ctx, []Addition{{Record: rec, Window: s.cfg.GroupWindow}}, nil)
	if err != nil {
		return Accepted{}, fmt.Errorf("store notification: %w", err)
	}
	a := res[0]
	status := "queued"
	if a.Joined {
		status = "grouped"
	} else {
		s.poke()
	}
	s.m.accepted.WithLabelValues(string(KindWorkflowFailed), status).Inc()
	return Accepted{NotificationID: a.Record.ID, Group: a.Record.Group, Owner: a.Record.Owner, Status: status}, nil
}

// idRE is the form of a notification ID (and of a list cursor).
var idRE = regexp.MustCompile(`^n_[0-9a-f]{24}$`)

// IsID tells whether s has the form of a notification ID.
func IsID(s string) bool { return idRE.MatchString(s) }

// List pages through the outbox, newest first.
func (s *Service) List(ctx context.Context, q ListQuery) (Page, error) {
	switch q.Status {
	case "", StatusPending, StatusDelivered, StatusDead:
	default:
		return Page{}, &errs.Error{Code: errs.InvalidRequest,
			Message: "status must be pending, delivered or dead",
			Fields:  []errs.FieldError{{Field: "status", Rule: "oneof=pending delivered dead"}}}
	}
	switch {
	case q.Limit == 0:
		q.Limit = 50
	case q.Limit < 0 || q.Limit > 500:
		return Page{}, &errs.Error{Code: errs.InvalidRequest, Message: "limit must be between 1 and 500",
			Fields: []errs.FieldError{{Field: "limit", Rule: "min=1,max=500"}}}
	}
	if q.Cursor != "" && !idRE.MatchString(q.Cursor) {
		return Page{}, &errs.Error{Code: errs.InvalidRequest, Message: "cursor is not one this server gave out",
			Fields: []errs.FieldError{{Field: "cursor", Rule: "cursor"}}}
	}
	return s.outbox.List(ctx, q)
}

// Resend queues a dead notification again, after the cause (a channel,
// the token) was fixed: it is routed again under the current
// configuration (the channel stored when it was created may be the one
// that failed), attempts start over and the worker posts it. The answer
// says where it goes.
func (s *Service) Resend(ctx context.Context, id string) (Notification, error) {
	if !idRE.MatchString(id) {
		return Notification{}, &errs.Error{Code: errs.InvalidRequest, Message: "id is not a notification id (n_…)",
			Fields: []errs.FieldError{{Field: "id", Rule: "notification_id"}}}
	}
	var was Status
	var from string
	r, err := s.outbox.Update(ctx, id, func(x *Record) {
		was, from = x.Status, x.Channel
		next, _ := resend(x, s.now(), s.cfg.targetOf(x))
		*x = *next
	})
	if err != nil {
		return Notification{}, err
	}
	if r == nil {
		return Notification{}, errs.Errorf(errs.NotFound, "no notification %s", id)
	}
	if was != StatusDead {
		return Notification{}, errs.Errorf(errs.Conflict, "notification %s is %s, not dead: only dead notifications are resent", id, was)
	}
	s.m.resent.Inc()
	s.log.Info("dead notification queued again by an operator", "id", id, "channel", r.Channel, "owner", r.Owner, "was_channel", from)
	s.poke()
	return r.Item(), nil
}

func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run delivers, consumes keystore events and purges until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	if s.slack == nil {
		s.log.Warn("Slack is not configured (SLACK_BOT_TOKEN is empty): notifications are stored and listed, delivery waits")
	}
	if s.cfg.PublicURL == "" {
		s.log.Info("Slack messages will have no console links: public_url is not set")
	}
	var commits <-chan struct{} // nil without events: never ready
	if s.opts.Events != nil {
		c, stop := s.opts.Events.Commits()
		defer stop()
		commits = c
	}
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		s.step(ctx)
		s.rounds.Add(1)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		case <-commits: // a key resolved, gone unknown, a breaker opened
		}
	}
}

// Rounds is how many rounds the worker has completed: a signal for tests
// and tools that must know the worker has looked at everything committed
// before some moment (two rounds after it), without waiting on the clock.
func (s *Service) Rounds() uint64 { return s.rounds.Load() }

// step is one round of the worker: events and the outages' parked
// counts, then escalation, delivery and purge.
func (s *Service) step(ctx context.Context) {
	s.consumeEvents(ctx)
	s.trackOutages(ctx)
	s.escalate(ctx)
	s.deliver(ctx)
	if now := s.now(); now.Sub(s.lastPurge) >= s.opts.PurgeInterval {
		s.lastPurge = now
		s.purge(ctx, now)
	}
}

func (s *Service) purge(ctx context.Context, now time.Time) {
	const batch = 500
	total := 0
	for ctx.Err() == nil {
		n, err := s.outbox.Purge(ctx, now.Add(-s.cfg.Retention), now, batch)
		if err != nil {
			s.log.Error("purge of old notifications failed", "err", err)
			return
		}
		total += n
		if n < batch {
			break
		}
	}
	if total > 0 {
		s.log.Info("purged old notifications", "count", total, "retention", s.cfg.Retention.String())
	}
}
