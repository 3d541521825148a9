package main

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/spf13/cobra"
)

// Stamped by a release build (deploy/release.sh):
//
//	go build -ldflags "-X main.buildVersion=v1.2.0 -X main.buildCommit=<sha> -X main.buildDate=<RFC 3339>"
//
// They are the one kind of package variable here: the linker can set
// nothing else.
var (
	buildVersion string
	buildCommit  string
	buildDate    string
)

// version names this binary: the stamped version, commit and date of a
// release build; else the module version with the VCS revision and time
// Go records when building from a checkout (marked +dirty when it had
// uncommitted changes).
func version() string {
	bi, _ := debug.ReadBuildInfo()
	return formatVersion(buildVersion, buildCommit, buildDate, bi)
}

func formatVersion(v, commit, date string, bi *debug.BuildInfo) string {
	dirty := false
	if bi != nil {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if commit == "" {
					commit = s.Value
				}
			case "vcs.time":
				if date == "" {
					date = s.Value
				}
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		return v
	}
	if dirty {
		commit += "+dirty"
	}
	if date == "" {
		return fmt.Sprintf("%s (commit %s)", v, commit)
	}
	return fmt.Sprintf("%s (commit %s, %s)", v, commit, date)
}

func newVersionCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary and of the running server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "client  %s\n", version())
			c := o.client()
			h, err := c.Health(cmd.Context())
			var e *client.Error
			switch {
			case errors.Is(err, client.ErrUnreachable):
				return err
			case errors.As(err, &e):
				return fmt.Errorf("%s answered without a version (HTTP %d): is it n8n-guard?", c.Base(), e.Status)
			case err != nil || h.Version == "":
				return fmt.Errorf("%s answered without a version: is it n8n-guard?", c.Base())
			}
			fmt.Fprintf(out, "server  %s (%s)\n", h.Version, c.Base())
			return nil
		},
	}
	o.addFlags(cmd)
	return cmd
}
