// Package prom registers a component's Prometheus collectors on the
// registry the guard serves on /metrics: every package registers through
// Register, so the rule for a missing registry and a repeated registration
// is stated once.
package prom

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers cs on reg in order and returns the first refusal. A
// nil reg registers nothing (a component built without metrics, as in
// tests). A collector whose series are registered on reg already (a second
// runner of a component in the same process) is not a refusal.
func Register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}
