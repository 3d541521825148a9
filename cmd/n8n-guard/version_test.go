package main

import (
	"runtime/debug"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	checkout := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "80b8eef0123456789abcdef"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name                string
		version, commit, at string
		bi                  *debug.BuildInfo
		want                string
	}{
		{"release build, stamped by -ldflags", "v1.2.0", "0123456789abcdef0123", "2026-12-01T09:00:00Z", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			"v1.2.0 (commit 0123456789ab, 2026-12-01T09:00:00Z)"},
		{"go build in a checkout with changes", "", "", "", checkout, "(devel) (commit 80b8eef01234+dirty, 2026-12-01T10:00:00Z)"},
		{"go install of a module version", "", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.1.0"}}, "v1.1.0"},
		{"no build information", "", "", "", nil, "(devel)"},
	} {
		if got := formatVersion(tc.version, tc.commit, tc.at, tc.bi); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
