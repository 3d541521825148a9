package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the build's module version, with the VCS revision when the
// binary was built from a checkout.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
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
			var h struct {
				Version string `json:"version"`
			}
			req, err := http.NewRequestWithContext(cmd.Context(), http.MethodGet, c.base+"/healthz", nil)
			if err != nil {
				return err
			}
			resp, err := c.http.Do(req)
			if err != nil {
				return fmt.Errorf("server unreachable at %s: %w", c.base, err)
			}
			defer resp.Body.Close()
			if json.NewDecoder(resp.Body).Decode(&h) != nil || h.Version == "" {
				return fmt.Errorf("%s answered without a version (HTTP %d): is it n8n-guard?", c.base, resp.StatusCode)
			}
			fmt.Fprintf(out, "server  %s (%s)\n", h.Version, c.base)
			return nil
		},
	}
	o.addFlags(cmd)
	return cmd
}
