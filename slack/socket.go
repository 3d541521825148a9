package slack

import (
	"context"
	"log"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// SocketMode receives button clicks over Slack's Socket Mode (a WebSocket
// the guard opens to Slack, for guards Slack cannot reach).
type SocketMode struct {
	api    *slack.Client
	clicks Clicks
	log    *slog.Logger
}

// NewSocketMode connects with the app-level token (SLACK_APP_TOKEN,
// xapp-… with connections:write); empty: Run returns at once.
func NewSocketMode(appToken string, o Options, clicks Clicks, log *slog.Logger) *SocketMode {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &SocketMode{clicks: clicks, log: log.With("component", "notify")}
	if appToken != "" {
		o.Wrap = nil
		s.api = newAPI(o, appToken)
	}
	return s
}

// Run receives clicks until ctx ends. Every envelope is acknowledged at once, inside Slack's three
// seconds; the clicks are then carried out like those that arrive over
// HTTP. A lost connection is opened again with capped backoff; the loss
// and the return are logged once each.
func (s *SocketMode) Run(ctx context.Context) error {
	if s.api == nil {
		return nil
	}
	b := &backoff.ExponentialBackOff{InitialInterval: time.Second, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: time.Minute}
	b.Reset()
	down := false
	for ctx.Err() == nil {
		smc := socketmode.New(s.api, socketmode.OptionLog(log.New(slogWriter{s.log}, "", 0)))
		connected, err := s.serve(ctx, smc)
		if ctx.Err() != nil {
			return nil
		}
		if connected {
			b.Reset()
			down = false
		}
		if !down {
			s.log.Warn("Slack Socket Mode connection lost; reconnecting (button clicks wait until then)", "err", err)
			down = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(b.NextBackOff()):
		}
	}
	return nil
}

// serveSocket runs one connection until it fails; connected reports
// whether it got as far as Slack's hello.
func (s *SocketMode) serve(ctx context.Context, smc *socketmode.Client) (connected bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- smc.RunContext(ctx) }()
	for {
		select {
		case err := <-errc:
			return connected, err
		case evt := <-smc.Events:
			switch evt.Type {
			case socketmode.EventTypeHello:
				if !connected {
					s.log.Info("Slack Socket Mode connected: button clicks arrive over it")
				}
				connected = true
			case socketmode.EventTypeInteractive:
				cb, ok := evt.Data.(slack.InteractionCallback)
				if evt.Request != nil {
					if err := smc.AckCtx(ctx, evt.Request.EnvelopeID, nil); err != nil {
						s.log.Warn("acknowledging a Socket Mode envelope failed", "err", err)
					}
				}
				if ok {
					s.clicks.Dispatch(clicksOf(cb, s.log)...)
				}
			case socketmode.EventTypeEventsAPI, socketmode.EventTypeSlashCommand:
				if evt.Request != nil {
					_ = smc.AckCtx(ctx, evt.Request.EnvelopeID, nil) // not ours; acknowledged so Slack does not resend
				}
			}
		}
	}
}

// slogWriter turns slack-go's log lines into debug lines of ours.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.log.Debug("socketmode: " + string(p))
	return len(p), nil
}
