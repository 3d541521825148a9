package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
)

// EventSource is where the keystore's events are read (keystore.Store
// satisfies it).
type EventSource interface {
	Events(ctx context.Context, after uint64, limit int) ([]keystore.Event, error)
}

// Options are the runtime settings of the service (the Config is what the
// operator writes in the config file).
type Options struct {
	// DB, when set, is asked for the shared bbolt file at each use instead
	// of New's db: the keystore's store (bolt.Store.DB) reopens the file
	// after a storage error, and the outbox must follow it.
	DB func() *bolt.DB
	// Token is the Slack bot token (SLACK_BOT_TOKEN); empty: notifications
	// are stored and listed, delivery waits.
	Token string
	// AppToken is the app-level token (SLACK_APP_TOKEN, xapp-…) with
	// connections:write; set, button clicks arrive over Socket Mode.
	AppToken string
	// N8nAPIURL (e.g. http://n8n:5678/api/v1) and N8nAPIKey (a key with
	// the execution:retry scope) enable "Retry execution"; either empty:
	// the button is not shown.
	N8nAPIURL string
	N8nAPIKey string
	// APIURL overrides Slack's Web API base URL, in slack-go's form with a
	// trailing slash (SLACK_API_URL), e.g. http://127.0.0.1:8080/api/.
	APIURL string
	// HTTPClient replaces the client built from the timeouts below.
	HTTPClient *http.Client
	// ConnectTimeout (dial + TLS, default 10s) and RequestTimeout (whole
	// request, default 30s) of each Slack call.
	ConnectTimeout time.Duration
	RequestTimeout time.Duration

	Logger     *slog.Logger
	Clock      func() time.Time
	Registerer prometheus.Registerer // nil: metrics are not registered
	Events     EventSource           // nil: no key/breaker alerts
	// Keys resolves keys decided from Slack (nil: the key buttons answer
	// that they cannot).
	Keys Keys

	// PollInterval: how often the worker looks for due notifications and
	// new keystore events (default 1s); intake also wakes it at once.
	PollInterval time.Duration
	// PurgeInterval: how often old notifications are purged (default 1h).
	PurgeInterval time.Duration
	// BackoffInitial and BackoffMax shape the exponential backoff with
	// jitter after transient Slack errors (defaults 5s and 10m).
	BackoffInitial time.Duration
	BackoffMax     time.Duration

	// Outbox replaces the bbolt outbox (db may then be nil).
	Outbox Outbox

	// wrap, set by tests, wraps the transport of the Slack client.
	wrap func(http.RoundTripper) http.RoundTripper
}

func (o Options) withDefaults() Options {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.PurgeInterval <= 0 {
		o.PurgeInterval = time.Hour
	}
	if o.BackoffInitial <= 0 {
		o.BackoffInitial = 5 * time.Second
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = 10 * time.Minute
	}
	return o
}

// Service is the intake, the outbox and the delivery worker.
type Service struct {
	cfg    Config
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	outbox Outbox
	slack  slackAPI // nil when no token is configured
	n8n    *n8nAPI  // nil when n8n's API is not configured
	pause  *slackPause
	wake   chan struct{}
	m      *metrics

	// Worker state; only the Run goroutine touches it.
	notBefore   time.Time // a 429 or a Slack fault pauses every call until then
	transient   *backoff.ExponentialBackOff
	lastPurge   time.Time
	eventsFault bool
	usersMu     sync.Mutex
	users       map[string]string // e-mail → user ID ("" when Slack does not know it)

	// Clicks run on their own goroutines, which Close waits for.
	clickLocks keyLocks
	clicks     sync.WaitGroup
	life       context.Context
	end        context.CancelFunc
	replays    replayGuard
}

// New opens the outbox in db (creating the notify/ buckets) and prepares the
// Slack client.
func New(db *bolt.DB, cfg Config, opts Options) (*Service, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("notify config: %w", err)
	}
	opts = opts.withDefaults()
	s := &Service{
		cfg: cfg, opts: opts, log: opts.Logger.With("component", "notify"), now: opts.Clock,
		outbox: opts.Outbox, wake: make(chan struct{}, 1), users: map[string]string{},
	}
	s.life, s.end = context.WithCancel(context.Background())
	if s.outbox == nil {
		file := opts.DB
		if file == nil && db != nil {
			file = func() *bolt.DB { return db }
		}
		if file == nil {
			return nil, errors.New("notify: no bbolt database and no outbox")
		}
		if s.outbox, err = newBoltOutbox(file); err != nil {
			return nil, fmt.Errorf("notify outbox: %w", err)
		}
	}
	if s.m, err = newMetrics(opts.Registerer); err != nil {
		return nil, err
	}
	if opts.Token != "" {
		s.slack = newSlackClient(opts)
	}
	s.n8n = newN8nAPI(opts.N8nAPIURL, opts.N8nAPIKey)
	s.transient = &backoff.ExponentialBackOff{InitialInterval: min(opts.BackoffInitial, transientPauseMax),
		RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: transientPauseMax}
	s.transient.Reset()
	s.pause = newSlackPause(DefaultFirstPause, cfg.SlackPause, func(open bool) {
		// From the first call that got no answer until one gets through.
		s.m.breakerOpen.Set(map[bool]float64{true: 1, false: 0}[open])
	})
	return s, nil
}

// Close waits for the clicks being carried out; the caller owns the bbolt
// file.
func (s *Service) Close() error {
	done := make(chan struct{})
	go func() { s.clicks.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		s.end() // Slack calls of a click are cut short
		<-done
	}
	s.end()
	return nil
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
	rec := &record{
		ID: newID(now), Kind: KindWorkflowFailed, Status: StatusPending, Group: f.group(),
		Count: 1, FirstAt: now, LastAt: now, CreatedAt: now, DueAt: now,
		Owner: rt.Owner, Channel: rt.Channel, Runbook: rt.Runbook,
		WorkflowID: f.WorkflowID, WorkflowName: f.WorkflowName, Node: f.Node, NodeType: f.NodeType,
		ExecutionID: f.ExecutionID, ExecutionURL: f.ExecutionURL, Mode: f.Mode, RetryOf: f.RetryOf,
		ErrorName: f.ErrorName, HTTPCode: f.HTTPCode, Message: f.Message, Description: f.Description,
	}
	if rt.Deadline > 0 {
		d := now.Add(rt.Deadline)
		rec.Deadline = &d
	}
	rec.EscalateAt = firstEscalation(rt, now)
	res, err := s.outbox.Add(ctx, []addition{{rec: rec, window: s.cfg.GroupWindow}}, nil)
	if err != nil {
		return Accepted{}, fmt.Errorf("store notification: %w", err)
	}
	a := res[0]
	status := "queued"
	if a.joined {
		status = "grouped"
	} else {
		s.poke()
	}
	s.m.accepted.WithLabelValues(string(KindWorkflowFailed), status).Inc()
	return Accepted{NotificationID: a.rec.ID, Group: a.rec.Group, Owner: a.rec.Owner, Status: status}, nil
}

var cursorRE = regexp.MustCompile(`^n_[0-9a-f]{24}$`)

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
	if q.Cursor != "" && !cursorRE.MatchString(q.Cursor) {
		return Page{}, &errs.Error{Code: errs.InvalidRequest, Message: "cursor is not one this server gave out",
			Fields: []errs.FieldError{{Field: "cursor", Rule: "cursor"}}}
	}
	return s.outbox.List(ctx, q)
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
	t := time.NewTicker(s.opts.PollInterval)
	defer t.Stop()
	for {
		s.step(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.wake:
		}
	}
}

// step is one round of the worker: events, then delivery, then purge.
func (s *Service) step(ctx context.Context) {
	s.consumeEvents(ctx)
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
