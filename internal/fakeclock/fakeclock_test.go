package fakeclock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/fakeclock"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// The clock is what a store is given as its clock.
var _ keystore.Clock = fakeclock.New().Now

func TestTheClockMovesOnlyWhenTold(t *testing.T) {
	c := fakeclock.New()
	if got := c.Now(); !got.Equal(fakeclock.Start) {
		t.Fatalf("a new clock reads %s, want %s", got, fakeclock.Start)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), fakeclock.Start.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("after Advance(90s): %s, want %s", got, want)
	}
	at := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	c.Set(at)
	if got := c.Now(); !got.Equal(at) {
		t.Fatalf("after Set: %s, want %s", got, at)
	}
	if got := fakeclock.At(at).Now(); !got.Equal(at) {
		t.Fatalf("At(at) reads %s, want %s", got, at)
	}
}

// A sleep on the clock is the clock moving by what was slept, at once:
// the runners' pace is read off the clock, not off the machine.
func TestASleepMovesTheClockByWhatWasSlept(t *testing.T) {
	c := fakeclock.New()
	start := time.Now()
	c.Sleep(context.Background(), time.Hour)
	c.Sleep(context.Background(), 250*time.Millisecond)
	if got, want := c.Now(), fakeclock.Start.Add(time.Hour+250*time.Millisecond); !got.Equal(want) {
		t.Fatalf("after sleeps of 1h and 250ms: %s, want %s", got, want)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("a sleep of an hour on the clock took %s of wall time", waited)
	}
}

// Readers in the code under test and the test's own Advance run at once;
// go test -race over this package says whether that is safe.
func TestReadsAndMovesAtOnce(t *testing.T) {
	c := fakeclock.New()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Advance(time.Millisecond)
			}
		}()
		go func() {
			defer wg.Done()
			for range 1000 {
				_ = c.Now()
			}
		}()
	}
	wg.Wait()
	if got, want := c.Now(), fakeclock.Start.Add(4*time.Second); !got.Equal(want) {
		t.Fatalf("after 4000 advances of 1 ms: %s, want %s", got, want)
	}
}
