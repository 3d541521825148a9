package n8n

import (
	"strings"
	"testing"
)

func TestN8NVersionSupport(t *testing.T) {
	for _, c := range []struct {
		name string
		v    Version
		ok   bool
	}{
		{"1.113.3, proven", Version{1, 113, 3, true}, true},
		{"a later 1.x", Version{1, 123, 0, true}, true},
		{"2.41.1, proven", Version{2, 41, 1, true}, true},
		{"2.x without its exact version", Version{Major: 2}, true},
		{"1.112, before the public API setup needs", Version{1, 112, 9, true}, false},
		{"0.236", Version{0, 236, 0, true}, false},
		{"3.0, never tried", Version{3, 0, 0, true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.v.Supported()
			if (err == nil) != c.ok {
				t.Fatalf("supported(%s) = %v, want ok=%v", c.v, err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "not supported") {
				t.Fatalf("error %q does not say the version is not supported", err)
			}
		})
	}
}
