package calls_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/calls"
	"github.com/n8n-guard/n8n-guard/internal/testwait"
)

type keyOf struct{}

func TestACallOutlivesTheStopForItsGraceOnly(t *testing.T) {
	t.Run("the stop does not end it, its cancel does", func(t *testing.T) {
		parent, stop := context.WithCancel(context.WithValue(context.Background(), keyOf{}, "trace"))
		call, cancel := calls.Outlive(parent, time.Hour)
		stop()
		if err := call.Err(); err != nil {
			t.Fatalf("the call's context ended with the stop (%v): a call n8n may act on was cut", err)
		}
		if v := call.Value(keyOf{}); v != "trace" {
			t.Fatalf("the call's context lost the parent's values: %v", v)
		}
		cancel()
		if !errors.Is(call.Err(), context.Canceled) {
			t.Fatalf("the call's context did not end with its cancel: %v", call.Err())
		}
	})
	t.Run("it ends its grace after the stop", func(t *testing.T) {
		parent, stop := context.WithCancel(context.Background())
		call, cancel := calls.Outlive(parent, time.Millisecond)
		defer cancel()
		stop()
		select {
		case <-call.Done():
		case <-time.After(testwait.Deadline):
			t.Fatal("the call's context never ended after the stop: a hung n8n would hold the stop")
		}
		if cause := context.Cause(call); !errors.Is(cause, calls.ErrGraceOver) {
			t.Fatalf("the call's context ended with %v, want ErrGraceOver", cause)
		}
	})
}

// Stopped is what a call of several requests asks before its acting one:
// false before the stop, true after it, also on a context made from the
// Outlive one, and false on any other context.
func TestStoppedTellsACallUnderOutliveThatTheStopCame(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	call, cancel := calls.Outlive(parent, time.Hour)
	defer cancel()
	inner, cancelInner := context.WithTimeout(call, time.Hour)
	defer cancelInner()
	if calls.Stopped(inner) {
		t.Fatal("Stopped before the stop")
	}
	stop()
	if !calls.Stopped(inner) || !calls.Stopped(call) {
		t.Fatal("not Stopped after the stop: a call would make its acting request after SIGTERM")
	}
	if calls.Stopped(parent) {
		t.Fatal("a context not made by Outlive says Stopped")
	}
}

// Reading ends at the stop with cause ErrStopped, unlike its Outlive
// parent, and is the plain ctx on any other context.
func TestReadingEndsAtTheStop(t *testing.T) {
	parent, stop := context.WithCancel(context.Background())
	call, cancel := calls.Outlive(parent, time.Hour)
	defer cancel()
	read, done := calls.Reading(call)
	defer done()
	stop()
	select {
	case <-read.Done():
	case <-time.After(testwait.Deadline):
		t.Fatal("a read under the grace did not end at the stop")
	}
	if !errors.Is(context.Cause(read), calls.ErrStopped) || call.Err() != nil {
		t.Fatalf("read ended with %v, the call with %v: want ErrStopped, and the call still running", context.Cause(read), call.Err())
	}
	plain, done2 := calls.Reading(context.Background())
	defer done2()
	if plain.Err() != nil {
		t.Fatal("Reading of a context not made by Outlive ended")
	}
}
