package prom

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func TestRegister(t *testing.T) {
	t.Run("every collector is registered", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if err := Register(reg, counter("a_total", "a"), counter("b_total", "b")); err != nil {
			t.Fatal(err)
		}
		if mfs, err := reg.Gather(); err != nil || len(mfs) != 2 {
			t.Fatalf("gathered %d families, err %v; want 2", len(mfs), err)
		}
	})
	t.Run("no registry: nothing to do", func(t *testing.T) {
		if err := Register(nil, counter("a_total", "a")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("the same series twice: not a refusal", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if err := Register(reg, counter("a_total", "a")); err != nil {
			t.Fatal(err)
		}
		if err := Register(reg, counter("a_total", "a")); err != nil {
			t.Fatalf("a second runner's identical series refused: %v", err)
		}
	})
	t.Run("a clash is refused and stops the rest", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if err := Register(reg, counter("a_total", "a")); err != nil {
			t.Fatal(err)
		}
		if err := Register(reg, counter("a_total", "other help"), counter("c_total", "c")); err == nil {
			t.Fatal("a series named like another with other help was registered")
		}
		if mfs, _ := reg.Gather(); len(mfs) != 1 {
			t.Fatalf("gathered %d families after the refusal, want 1", len(mfs))
		}
	})
}
