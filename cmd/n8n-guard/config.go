package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/internal/tlsserve"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/rerun"
)

// Config is everything the server needs, parsed once from flags, the
// environment and the optional YAML file.
type Config struct {
	Addr       string
	TLS        tlsserve.Config // empty: plain HTTP
	DataDir    string
	ConfigFile string // optional
	// Store is empty for the embedded bbolt file in DataDir, or a
	// postgres:// URL for the PostgreSQL backend (docs/postgres.md).
	Store string
	// Clock replaces the clock of the store and of every runner (catch-up,
	// notify, checks) in tests; nil is the real one (for the PostgreSQL
	// store: the database's).
	Clock keystore.Clock

	// Tokens accepted on /v1; empty: the one in <data>/api-token.
	Tokens []string
	// ScopedTokens are the named tokens of the file's tokens: section,
	// resolved (FileConfig.ScopedTokens).
	ScopedTokens []api.TokenScope
	// Console is the file's console: section, resolved
	// (FileConfig.ConsoleSignIn); its session key is read at start.
	Console api.ConsoleConfig

	// HTTP are the server's limits and timeouts (serve's flags), handed
	// to the API as they are; api.Limits says each default.
	HTTP api.Limits
	// AcceptRestore starts on a bbolt file older than the one the data
	// folder last served (a backup restored in place), logging it.
	AcceptRestore bool
	// ShutdownTimeout: how long Close waits for in-flight requests, and
	// a stop for n8n's answer to a resume or re-run call in flight (default
	// DefaultShutdownTimeout, 10 s).
	ShutdownTimeout time.Duration
	// SweepInterval: how often expired leases and records are swept
	// (default DefaultSweepInterval, 1 min).
	SweepInterval time.Duration

	SlackBotToken string
	SlackAPIURL   string
	// SlackSigningSecret checks button clicks over HTTP; SlackAppToken
	// (xapp-…) receives them over Socket Mode instead.
	SlackSigningSecret string
	SlackAppToken      string
	// N8nAPIURL and N8nAPIKey (n8n's public API) enable the "Retry
	// execution" button, re-runs and the off-workflow watch; the key's
	// scopes (execution:read, execution:list, execution:retry,
	// workflow:read, workflow:list) and what each is for: docs/n8n.md,
	// "The n8n API key's scopes".
	N8nAPIURL string
	N8nAPIKey string
	// N8nURL is n8n's address people open (N8N_URL, as for `n8n-guard
	// n8n setup`): the console links executions and workflows there.
	// Empty: N8N_API_URL's instance.
	N8nURL string
	// N8nWebhookURL (N8N_WEBHOOK_URL) is n8n's public webhook address
	// (its WEBHOOK_URL) when the guard reaches n8n at N8N_API_URL
	// instead: resume URLs of it are called there (resume.go).
	N8nWebhookURL string
	// ResumeSecret is the header credential of the resume calls to parked
	// executions (park.go); empty: the database's on PostgreSQL, else the
	// one in <data>/resume-secret (shared.go).
	ResumeSecret string
	// ConsoleSessionKey (N8N_GUARD_CONSOLE_SESSION_KEY, 32 bytes in hex)
	// seals the console's cookies; empty: the database's on PostgreSQL,
	// else <data>/console-session-key (shared.go).
	ConsoleSessionKey string
	// CheckSecret is the header credential of the calls to checks
	// (checks.go); empty: the database's on PostgreSQL, else
	// <data>/check-secret (shared.go).
	CheckSecret string
	// ResumeOrigins and ResumePath (N8N_GUARD_RESUME_ORIGINS,
	// N8N_GUARD_RESUME_PATH) say where resume calls may go (resume.go);
	// empty: the file's n8n: section.
	ResumeOrigins []string
	ResumePath    string
	// RerunReads caps the re-runs' asks of n8n's API a second, whatever
	// their destinations (--n8n-api-reads-per-second, default
	// rerun.DefaultReads; negative: no cap).
	RerunReads float64

	File FileConfig
}

// NewConfig is serve's configuration before flags, the environment and
// the file apply: every default, as the flags show them.
func NewConfig() Config {
	return Config{Addr: DefaultAddr, DataDir: DefaultDataDir, HTTP: api.Limits{}.WithDefaults(), RerunReads: rerun.DefaultReads}.withDefaults()
}

// withDefaults fills in the defaults Main applies itself (NewMain); a zero
// or negative duration is the default. The components fill in their own.
func (c Config) withDefaults() Config {
	c.ShutdownTimeout = cmp.Or(max(c.ShutdownTimeout, 0), DefaultShutdownTimeout)
	c.SweepInterval = cmp.Or(max(c.SweepInterval, 0), DefaultSweepInterval)
	return c
}

// FileConfig is the YAML file. The keys the contract fixes mean exactly
// what it says (docs/api.md, "Configuration file"); unknown keys are an
// error, so a typo never silently falls back to a default.
type FileConfig struct {
	Namespaces   map[string]NamespaceConfig   `yaml:"namespaces"`
	Destinations map[string]DestinationConfig `yaml:"destinations"`
	Notify       NotifyConfig                 `yaml:"notify"`
	Owners       []OwnerConfig                `yaml:"owners"`
	Tokens       map[string]TokenConfig       `yaml:"tokens"`
	Metrics      MetricsConfig                `yaml:"metrics"`
	// Checks are asked before a person is paged about an unknown key
	// (checks.go); namespaces and destinations name them.
	Checks  map[string]CheckConfig `yaml:"checks"`
	Console ConsoleFileConfig      `yaml:"console"`
	// PublicURL is the guard's address as people open it in a browser:
	// Slack messages link to their console pages under it.
	PublicURL string `yaml:"public_url"`
	// N8n says where resume calls may go (resume.go).
	N8n N8nFileConfig `yaml:"n8n"`
	// People names each person's identities, so that four eyes compares
	// persons, not spellings (keystore/person.go).
	People map[string]PersonIdentities `yaml:"people"`
	// FourEyes says how four eyes reads e-mail addresses
	// (keystore/address.go).
	FourEyes FourEyesConfig `yaml:"four_eyes"`
}

// FourEyesConfig is the four_eyes: section.
type FourEyesConfig struct {
	// FoldPlusTags (default true): ana+x@example.com is ana@example.com,
	// as most mail providers deliver both to one mailbox. false where a
	// tag is a mailbox of its own.
	FoldPlusTags *bool `yaml:"fold_plus_tags"`
}

// PersonIdentities is one entry of people: the identifiers by which the
// guard may meet one person. The entry's name is one of them too.
type PersonIdentities struct {
	Emails []string `yaml:"emails"`
	// Slack user IDs (U…, W…), as Slack's clicks name the person.
	Slack []string `yaml:"slack"`
	// OIDCSubjects: the sub claim the console's identity provider gives.
	OIDCSubjects []string `yaml:"oidc_subjects"`
	// Names: any other spelling (a Slack user name, a token's person).
	Names []string `yaml:"names"`
}

var slackUserRE = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)

// logFourEyes says once at start when four eyes can compare spellings
// only: namespaces with four eyes, and no people: to tell that an e-mail
// address and a Slack user are one person.
func logFourEyes(log *slog.Logger, p keystore.Policies) {
	if p.People.Known() {
		return
	}
	var ns []string
	for name, np := range p.Namespaces {
		if np.Approval.Required && np.Approval.FourEyes {
			ns = append(ns, name)
		}
	}
	if len(ns) > 0 {
		slices.Sort(ns)
		log.Warn("four eyes compares spellings only: no people: section says which e-mail addresses, Slack users and OIDC subjects are one person, "+
			"so a requester's other identity may approve; name the approvers and requesters under people:", "namespaces", ns)
	}
}

// people reads people: into the keystore's directory.
func (fc FileConfig) people() (keystore.People, error) {
	ids := make(map[string][]string, len(fc.People))
	for _, name := range sortedKeys(fc.People) {
		pc := fc.People[name]
		for i, u := range pc.Slack {
			if !slackUserRE.MatchString(u) {
				return keystore.People{}, fmt.Errorf("people.%s.slack[%d]: %q is not a Slack user ID (U… or W…)", name, i, u)
			}
		}
		for i, e := range pc.Emails {
			if !strings.Contains(e, "@") {
				return keystore.People{}, fmt.Errorf("people.%s.emails[%d]: %q is not an e-mail address", name, i, e)
			}
		}
		ids[name] = slices.Concat(pc.Emails, pc.Slack, pc.OIDCSubjects, pc.Names)
	}
	match := keystore.PersonMatch{KeepPlusTags: fc.FourEyes.FoldPlusTags != nil && !*fc.FourEyes.FoldPlusTags}
	p, err := keystore.NewPeople(ids, match)
	if err != nil {
		return p, fmt.Errorf("people.%w", err)
	}
	return p, nil
}

// TokenConfig is one entry of tokens: a named token with a role and the
// namespaces it may use. Its value is never in the file: either its
// SHA-256 (hex) or the name of an environment variable that holds it.
// Person names whose token it is: its decisions record that person, and
// a body's by naming someone else is refused; without it the token is
// shared, and its decisions record the body's by as not verified.
type TokenConfig struct {
	SHA256     string   `yaml:"sha256"`
	Env        string   `yaml:"env"`
	Role       string   `yaml:"role"`
	Namespaces []string `yaml:"namespaces"`
	Person     string   `yaml:"person"`
}

// MetricsConfig is the metrics: section.
type MetricsConfig struct {
	// LabelLimit: distinct namespaces (and destinations) beyond those
	// configured that get series of their own; later ones share "other".
	LabelLimit int `yaml:"label_limit"`
}

// NamespaceConfig is one entry of namespaces:.
type NamespaceConfig struct {
	Lease         Duration `yaml:"lease"`
	Retention     Duration `yaml:"retention"`
	OnLeaseExpiry string   `yaml:"on_lease_expiry"`
	Owner         string   `yaml:"owner"`
	Channel       string   `yaml:"channel"`
	Runbook       string   `yaml:"runbook"`
	// ParkedLimit: an event parked longer is reported (default 72h).
	ParkedLimit Duration `yaml:"parked_limit"`
	// Check names the entry of checks: asked before a person is paged.
	Check string `yaml:"check"`
	// Approval before writing (docs/api.md#approval-before-writing-extension):
	// "required" or "" (none); approvers are Slack users or groups, like
	// resolvers; four_eyes (default true) keeps whoever triggered an event
	// from approving it.
	Approval       string   `yaml:"approval"`
	Approvers      []string `yaml:"approvers"`
	FourEyes       *bool    `yaml:"four_eyes"`
	DecidersConfig `yaml:",inline"`
}

// DecidersConfig is who may press a message's buttons besides its owner,
// and where it goes when nobody acknowledges it (docs/notify.md).
type DecidersConfig struct {
	Resolvers  []string               `yaml:"resolvers"`
	Escalation []EscalationStepConfig `yaml:"escalation"`
}

// EscalationStepConfig is one step of escalation:.
type EscalationStepConfig struct {
	After Duration `yaml:"after"`
	To    string   `yaml:"to"`
}

func (d DecidersConfig) deciders() notify.Deciders {
	out := notify.Deciders{Resolvers: d.Resolvers}
	for _, st := range d.Escalation {
		out.Escalation = append(out.Escalation, notify.EscalationStep{After: time.Duration(st.After), To: st.To})
	}
	return out
}

var slackPersonRE = regexp.MustCompile(`^[UWS][A-Z0-9]{2,}$`)

// approval reads a namespace's approval keys.
func (n NamespaceConfig) approval(where string) (keystore.ApprovalPolicy, error) {
	ap := keystore.ApprovalPolicy{FourEyes: n.FourEyes == nil || *n.FourEyes}
	switch n.Approval {
	case "":
		if len(n.Approvers) > 0 || n.FourEyes != nil {
			return ap, fmt.Errorf("%s: approvers and four_eyes need approval: required", where)
		}
		return keystore.ApprovalPolicy{}, nil
	case "required":
		ap.Required = true
	default:
		return ap, fmt.Errorf("%s.approval: %q must be \"required\" (or left out)", where, n.Approval)
	}
	if len(n.Approvers) == 0 {
		return ap, fmt.Errorf("%s.approvers: approval: required needs at least one approver (a Slack user U… or group S…)", where)
	}
	for i, a := range n.Approvers {
		if !slackPersonRE.MatchString(a) {
			return ap, fmt.Errorf("%s.approvers[%d]: %q is neither a Slack user ID (U…) nor a user group ID (S…)", where, i, a)
		}
	}
	return ap, nil
}

// DestinationConfig is one entry of destinations:.
type DestinationConfig struct {
	Cooldown Duration `yaml:"cooldown"`
	// FailureThreshold and UnreachableThreshold: how many distinct keys
	// must fail to open the breaker (docs/api.md#get-v1destinations).
	FailureThreshold     *int `yaml:"failure_threshold"`
	UnreachableThreshold *int `yaml:"unreachable_threshold"`
	// Namespaces, when set, are the only namespaces that may use the
	// destination and report its failures.
	Namespaces []string `yaml:"namespaces"`
	Owner      string   `yaml:"owner"`
	Channel    string   `yaml:"channel"`
	Runbook    string   `yaml:"runbook"`
	// The pace of the catch-up after an outage (docs/api.md#parking):
	// resumes per second (default 5) and resumed executions in flight
	// (default 4).
	CatchUpRate        *float64 `yaml:"catch_up_rate"`
	CatchUpConcurrency *int     `yaml:"catch_up_concurrency"`
	// Check: as a namespace's, for the keys of namespaces that name none.
	Check          string `yaml:"check"`
	DecidersConfig `yaml:",inline"`
}

// NotifyConfig is the notify: section.
type NotifyConfig struct {
	DefaultChannel string   `yaml:"default_channel"`
	DefaultOwner   string   `yaml:"default_owner"`
	DefaultRunbook string   `yaml:"default_runbook"`
	GroupWindow    Duration `yaml:"group_window"`
	Retention      Duration `yaml:"retention"`
	SlackPause     Duration `yaml:"slack_pause"`
	RetryFor       Duration `yaml:"retry_for"`
	// MaxAttempts is refused: notifications are no longer dropped after a
	// count (retry_for replaced it); kept so the refusal can say so.
	MaxAttempts *int   `yaml:"max_attempts"`
	GuardURL    string `yaml:"guard_url"`
	// SlackWorkspace ("acme", or acme.slack.com) lets the console link
	// to a Slack message itself, not only to its channel.
	SlackWorkspace string `yaml:"slack_workspace"`
}

// OwnerConfig is one rule of owners: (first match wins).
type OwnerConfig struct {
	Workflow       string   `yaml:"workflow"`
	Owner          string   `yaml:"owner"`
	Channel        string   `yaml:"channel"`
	Runbook        string   `yaml:"runbook"`
	Deadline       Duration `yaml:"deadline"`
	DecidersConfig `yaml:",inline"`
}

// Duration is a Go duration string in YAML ("90s", "5m", "720h"). A bare
// number is refused: "lease: 120" would otherwise mean 120 nanoseconds.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return fmt.Errorf("line %d: %q is not a duration: write it with a unit, e.g. \"90s\", \"5m\", \"720h\"", n.Line, n.Value)
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration: write it with a unit, e.g. \"90s\", \"5m\", \"720h\"", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// LoadFile reads and checks the YAML file at path.
func LoadFile(path string) (FileConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return FileConfig{}, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	fc, err := ParseFile(f)
	if err != nil {
		return FileConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	return fc, nil
}

// ParseFile decodes and checks a YAML configuration.
func ParseFile(r io.Reader) (FileConfig, error) {
	var fc FileConfig
	raw, err := io.ReadAll(r)
	if err != nil {
		return fc, err
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return fc, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		return fc, err
	}
	if err := fc.checkChecks(); err != nil { // checks.go
		return fc, err
	}
	if _, err := fc.Policies(); err != nil {
		return fc, err
	}
	n := fc.Notify
	for name, d := range map[string]Duration{"group_window": n.GroupWindow, "retention": n.Retention, "slack_pause": n.SlackPause, "retry_for": n.RetryFor} {
		if d < 0 {
			return fc, fmt.Errorf("notify.%s: must not be negative", name)
		}
	}
	if n.MaxAttempts != nil {
		return fc, fmt.Errorf("notify.max_attempts is gone: a notification is no longer dropped after a number of attempts; " +
			"use notify.retry_for (how long transient Slack failures are retried, default 168h)")
	}
	if err := notify.CheckPublicURL(fc.PublicURL); err != nil {
		return fc, err
	}
	if fc.Metrics.LabelLimit < 0 {
		return fc, fmt.Errorf("metrics.label_limit: must not be negative")
	}
	// The values of env: tokens are checked at start (ScopedTokens); the
	// rest here, so `n8n-guard` refuses a wrong file before anything runs.
	if _, err := fc.ScopedTokens(func(string) string { return "placeholder" }); err != nil {
		return fc, err
	}
	if _, err := fc.ConsoleSignIn(func(string) string { return "placeholder" }, func(string) ([]byte, error) { return []byte("placeholder"), nil }); err != nil {
		return fc, err
	}
	return fc, nil
}

// ScopedTokens resolves tokens: into the API's scoped tokens, reading the
// values of env: tokens with getenv.
func (fc FileConfig) ScopedTokens(getenv func(string) string) ([]api.TokenScope, error) {
	var out []api.TokenScope
	for _, name := range sortedKeys(fc.Tokens) {
		tc := fc.Tokens[name]
		where := "tokens." + name
		if !keystore.ValidNamespace(name) {
			return nil, fmt.Errorf("%s: not a valid token name (1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit)", where)
		}
		ts := api.TokenScope{Name: name, Role: access.Role(tc.Role), Namespaces: tc.Namespaces, Person: strings.TrimSpace(tc.Person)}
		if !slices.Contains(access.Roles, ts.Role) {
			return nil, fmt.Errorf("%s.role: %q must be one of %v", where, tc.Role, access.Roles)
		}
		for _, ns := range tc.Namespaces {
			if !keystore.ValidNamespace(ns) {
				return nil, fmt.Errorf("%s.namespaces: %q is not a valid namespace name", where, ns)
			}
		}
		if err := api.CheckTokenPerson(ts); err != nil {
			return nil, fmt.Errorf("%s.person: %w", where, err)
		}
		switch {
		case (tc.SHA256 == "") == (tc.Env == ""):
			return nil, fmt.Errorf("%s: give exactly one of sha256 (the hex SHA-256 of the token) or env (the variable that holds it)", where)
		case tc.SHA256 != "":
			b, err := hex.DecodeString(tc.SHA256)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%s.sha256: not a hex SHA-256 (64 hex digits; e.g. printf %%s \"$TOKEN\" | sha256sum)", where)
			}
			copy(ts.SHA256[:], b)
		default:
			v := strings.TrimSpace(getenv(tc.Env))
			if v == "" {
				return nil, fmt.Errorf("%s.env: the variable %s is not set", where, tc.Env)
			}
			ts.SHA256 = sha256.Sum256([]byte(v))
		}
		out = append(out, ts)
	}
	return out, nil
}

// Policies maps namespaces: and destinations: to the keystore's policies,
// checking every value.
func (fc FileConfig) Policies() (keystore.Policies, error) {
	p := keystore.Policies{
		Namespaces:   make(map[string]keystore.NamespacePolicy, len(fc.Namespaces)),
		Destinations: make(map[string]keystore.DestinationPolicy, len(fc.Destinations)),
	}
	for _, name := range sortedKeys(fc.Namespaces) {
		np, err := fc.namespacePolicy(name, fc.Namespaces[name])
		if err != nil {
			return p, err
		}
		p.Namespaces[name] = np
	}
	people, err := fc.people()
	if err != nil {
		return p, err
	}
	p.People = people
	for _, name := range sortedKeys(fc.Destinations) {
		dp, err := fc.destinationPolicy(name, fc.Destinations[name])
		if err != nil {
			return p, err
		}
		p.Destinations[name] = dp
	}
	return p, nil
}

// namespacePolicy checks one entry of namespaces: and maps it to the
// keystore's policy.
func (fc FileConfig) namespacePolicy(name string, n NamespaceConfig) (keystore.NamespacePolicy, error) {
	where := "namespaces." + name
	if !keystore.ValidNamespace(name) {
		return keystore.NamespacePolicy{}, fmt.Errorf("%s: not a valid namespace name (1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit)", where)
	}
	lease := time.Duration(n.Lease)
	if lease != 0 && (lease < time.Second || lease > keystore.MaxLeaseSeconds*time.Second || lease%time.Second != 0) {
		return keystore.NamespacePolicy{}, fmt.Errorf("%s.lease: %s must be whole seconds between 1s and 24h", where, lease)
	}
	if n.Retention < 0 {
		return keystore.NamespacePolicy{}, fmt.Errorf("%s.retention: must not be negative", where)
	}
	expiry := keystore.LeaseExpiry(n.OnLeaseExpiry)
	switch expiry {
	case "", keystore.ExpireToUnknown, keystore.ExpireReclaim:
	default:
		return keystore.NamespacePolicy{}, fmt.Errorf("%s.on_lease_expiry: %q must be %q or %q", where, n.OnLeaseExpiry, keystore.ExpireToUnknown, keystore.ExpireReclaim)
	}
	np := keystore.NamespacePolicy{
		Lease: lease, Retention: time.Duration(n.Retention), OnLeaseExpiry: expiry,
		Owner: n.Owner, Runbook: n.Runbook, ParkedLimit: time.Duration(n.ParkedLimit), Check: n.Check,
	}
	if err := fc.checkNamed(where, n.Check); err != nil {
		return np, err
	}
	if n.ParkedLimit < 0 {
		return np, fmt.Errorf("%s.parked_limit: must not be negative", where)
	}
	var err error
	np.Approval, err = n.approval(where)
	return np, err
}

// destinationPolicy checks one entry of destinations: and maps it to the
// keystore's policy.
func (fc FileConfig) destinationPolicy(name string, d DestinationConfig) (keystore.DestinationPolicy, error) {
	where := "destinations." + name
	if !keystore.ValidNamespace(name) {
		return keystore.DestinationPolicy{}, fmt.Errorf("%s: not a valid destination name (1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit)", where)
	}
	if d.Cooldown < 0 {
		return keystore.DestinationPolicy{}, fmt.Errorf("%s.cooldown: must not be negative", where)
	}
	dp := keystore.DestinationPolicy{Cooldown: time.Duration(d.Cooldown), Owner: d.Owner, Check: d.Check}
	if err := fc.checkNamed(where, d.Check); err != nil {
		return dp, err
	}
	if err := d.thresholds(where, &dp); err != nil {
		return dp, err
	}
	if err := d.checkNamespaces(where); err != nil {
		return dp, err
	}
	dp.Namespaces = slices.Clone(d.Namespaces)
	return dp, d.catchUp(where, &dp)
}

// thresholds reads failure_threshold and unreachable_threshold into dp.
func (d DestinationConfig) thresholds(where string, dp *keystore.DestinationPolicy) error {
	if d.FailureThreshold != nil {
		if *d.FailureThreshold < 1 {
			return fmt.Errorf("%s.failure_threshold: %d must be at least 1", where, *d.FailureThreshold)
		}
		dp.FailureThreshold = *d.FailureThreshold
	}
	if d.UnreachableThreshold != nil {
		failures := cmp.Or(dp.FailureThreshold, keystore.DefaultFailureThreshold)
		if *d.UnreachableThreshold < 1 || *d.UnreachableThreshold > failures {
			return fmt.Errorf("%s.unreachable_threshold: %d must be 1-%d (at most failure_threshold)", where, *d.UnreachableThreshold, failures)
		}
		dp.UnreachableThreshold = *d.UnreachableThreshold
	}
	return nil
}

// checkNamespaces checks a destination's namespaces: list.
func (d DestinationConfig) checkNamespaces(where string) error {
	if d.Namespaces != nil && len(d.Namespaces) == 0 {
		return fmt.Errorf("%s.namespaces: an empty list would admit no namespace; leave it out to admit every namespace", where)
	}
	for i, ns := range d.Namespaces {
		if !keystore.ValidNamespace(ns) {
			return fmt.Errorf("%s.namespaces[%d]: %q is not a valid namespace name", where, i, ns)
		}
		if slices.Contains(d.Namespaces[:i], ns) {
			return fmt.Errorf("%s.namespaces[%d]: %q is listed twice", where, i, ns)
		}
	}
	return nil
}

// catchUp reads catch_up_rate and catch_up_concurrency into dp.
func (d DestinationConfig) catchUp(where string, dp *keystore.DestinationPolicy) error {
	if d.CatchUpRate != nil {
		if !(*d.CatchUpRate > 0 && *d.CatchUpRate <= 10000) {
			return fmt.Errorf("%s.catch_up_rate: %v must be a number of resumes per second above 0 (at most 10000)", where, *d.CatchUpRate)
		}
		dp.CatchUpRate = *d.CatchUpRate
	}
	if d.CatchUpConcurrency != nil {
		if *d.CatchUpConcurrency < 1 || *d.CatchUpConcurrency > 1000 {
			return fmt.Errorf("%s.catch_up_concurrency: %d must be 1-1000", where, *d.CatchUpConcurrency)
		}
		dp.CatchUpConcurrency = *d.CatchUpConcurrency
	}
	return nil
}

// NotifyConfig maps notify:, owners: and the owners of namespaces: and
// destinations: to the notify package's configuration. notify checks the
// owners' syntax itself (notify.New).
func (fc FileConfig) NotifyConfig() notify.Config {
	c := notify.Config{
		DefaultChannel: fc.Notify.DefaultChannel,
		DefaultOwner:   fc.Notify.DefaultOwner,
		DefaultRunbook: fc.Notify.DefaultRunbook,
		GroupWindow:    time.Duration(fc.Notify.GroupWindow),
		Retention:      time.Duration(fc.Notify.Retention),
		SlackPause:     time.Duration(fc.Notify.SlackPause),
		RetryFor:       time.Duration(fc.Notify.RetryFor),
		GuardURL:       fc.Notify.GuardURL,
		PublicURL:      fc.PublicURL,
		Namespaces:     make(map[string]notify.Route, len(fc.Namespaces)),
		Destinations:   make(map[string]notify.Route, len(fc.Destinations)),
	}
	for _, o := range fc.Owners {
		c.Owners = append(c.Owners, notify.OwnerRule{
			Workflow: o.Workflow, Owner: o.Owner, Channel: o.Channel, Runbook: o.Runbook, Deadline: time.Duration(o.Deadline),
			Deciders: o.deciders(),
		})
	}
	for name, n := range fc.Namespaces {
		c.Namespaces[name] = notify.Route{Owner: n.Owner, Channel: n.Channel, Runbook: n.Runbook, Deciders: n.deciders(), Approvers: n.Approvers}
	}
	for name, d := range fc.Destinations {
		c.Destinations[name] = notify.Route{Owner: d.Owner, Channel: d.Channel, Runbook: d.Runbook, Deciders: d.deciders()}
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// splitTokens parses N8N_GUARD_TOKENS: comma-separated, blanks dropped.
func splitTokens(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// n8nLinkBase is n8n's address for the console's links: N8N_URL, else
// the instance of N8N_API_URL ("" : neither is set).
func (c Config) n8nLinkBase() string {
	if c.N8nURL != "" {
		return n8n.New(c.N8nURL, "", 0).Base()
	}
	if c.N8nAPIURL != "" {
		return n8n.New(c.N8nAPIURL, "", 0).Base()
	}
	return ""
}
