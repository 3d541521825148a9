package notify

import (
	"context"
	"time"
)

// Hooks for the tests of package notify_test (which use the bbolt outbox
// and the slack adapter, which import this package).

// Step runs one worker round.
func (s *Service) Step(ctx context.Context) { s.step(ctx) }

// ConsumeEvents runs the event consumption of one round.
func (s *Service) ConsumeEvents(ctx context.Context) { s.consumeEvents(ctx) }

// Outbox is the service's outbox.
func (s *Service) Outbox() Outbox { return s.outbox }

// Wire sets the keystore a test opened after the service.
func (s *Service) Wire(keys Keys, events EventSource) { s.opts.Keys, s.opts.Events = keys, events }

// SetExecutions sets n8n's API.
func (s *Service) SetExecutions(e Executions) { s.opts.Executions = e }

// Pause is the length of the pause in force after Slack was unreachable.
func (s *Service) Pause() time.Duration { return s.pause.length() }

// PurgeNow makes the next round purge.
func (s *Service) PurgeNow() { s.lastPurge = time.Time{} }

// Check is Config's check (New runs it).
func (c Config) Check() (Config, error) { return c.withDefaults() }

// The defaults the harness tests measure against.
const (
	DefaultGroupWindow = defaultGroupWindow
	DefaultSlackPause  = defaultSlackPause
)

// ConsoleLinks are the console pages a message links to.
func ConsoleLinks(r *Record, base string) []Link { return consoleLinks(r, base) }
