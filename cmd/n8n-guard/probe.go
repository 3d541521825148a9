package main

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/spf13/cobra"
)

// newProbeCmd is the container's HEALTHCHECK: a scratch image has no curl,
// so the binary asks itself. It reads the same --addr and TLS settings as
// serve (N8N_GUARD_ADDR, N8N_GUARD_TLS_CERT, N8N_GUARD_ACME_DOMAINS), so
// the image's environment points it at the right port and scheme.
func newProbeCmd() *cobra.Command {
	var (
		addr, path string
		timeout    time.Duration
		tf         tlsFlags
	)
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Exit 0 when the local server answers /readyz (or --path) with 200, else 1",
		Long: `Exit 0 when the local server answers /readyz (or --path) with 200, else 1.

For a container's HEALTHCHECK, a systemd ExecStartPost or a script: the
image has no curl. A wildcard --addr (0.0.0.0, [::]) is probed on loopback;
over TLS the certificate is not verified (it is issued for a public name,
the probe asks loopback whether the process answers).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := probeURL(addr, path, tf.config().Enabled())
			if err != nil {
				return err
			}
			body, err := client.Probe(cmd.Context(), strings.TrimSuffix(url, path), path, timeout)
			if err != nil {
				return fmt.Errorf("probe %s: %w", url, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", url, body)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&addr, "addr", DefaultAddr, "the address serve listens on")
	fs.StringVar(&path, "path", "/readyz", "the path to ask: /readyz (store answers, not draining) or /healthz (process up)")
	fs.DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	tf.add(fs)
	bindEnv(fs, "addr", "N8N_GUARD_ADDR")
	return cmd
}

// probeURL turns serve's listen address into a URL to ask: a wildcard or
// empty host becomes loopback.
func probeURL(addr, path string, tls bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("--addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + path, nil
}
