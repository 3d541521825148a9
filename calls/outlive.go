package calls

import (
	"context"
	"errors"
	"time"
)

// DefaultGrace is a worker's grace (its Options.Grace) when none is
// set: serve sets it to its shutdown timeout, whose default it is too.
const DefaultGrace = 10 * time.Second

// ErrGraceOver is the cause of a context Outlive ended: the grace its
// call had after a stop has passed.
var ErrGraceOver = errors.New("stopping: the grace of a call in flight has passed")

// Outlive is a context for a call to n8n that may already act on it (a
// resume, a retry): it keeps ctx's values and does not end when ctx
// ends, so a stop (SIGTERM) lets the call finish and its answer be
// recorded, and the key needs no claim's lapse nor a second call. It
// ends, with cause ErrGraceOver, grace after ctx ended, so a hung n8n
// does not hold a stop for longer; and when its cancel is called.
func Outlive(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	octx, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), stopOf{}, ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-octx.Done():
			return
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel(ErrGraceOver)
		case <-octx.Done():
		}
	}()
	return octx, func() { cancel(context.Canceled) }
}

// stopOf is the key of an Outlive context's value: the context whose end
// is the stop.
type stopOf struct{}

// ErrStopped is what a call of several requests answers when the stop
// came before its acting one (Stopped): nothing was asked of n8n that it
// could act on, so the claims go back instead of lapsing.
var ErrStopped = errors.New("stopping: the call was not made")

// Stopped tells a call made under Outlive (ctx, or a context made from
// it) that the stop came: the grace is for a request n8n may already act
// on, so one that reads first (the re-run's checks before its POST of the
// retry) makes no acting request after the stop, and answers ErrStopped.
func Stopped(ctx context.Context) bool {
	stop, ok := ctx.Value(stopOf{}).(context.Context)
	return ok && stop.Err() != nil
}

// Reading is ctx, ended also at the stop when ctx was made by Outlive
// (cause ErrStopped): for the requests a call reads with before its
// acting one, which the grace is not for. A read the stop cut is no
// call made: its claims go back at once.
func Reading(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancelCause(ctx)
	stop, ok := ctx.Value(stopOf{}).(context.Context)
	if !ok {
		return rctx, func() { cancel(context.Canceled) }
	}
	unhook := context.AfterFunc(stop, func() { cancel(ErrStopped) })
	return rctx, func() { unhook(); cancel(context.Canceled) }
}
