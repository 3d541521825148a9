package main

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/n8n-guard/n8n-guard/client"
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
