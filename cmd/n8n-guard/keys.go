package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// clientOptions are the flags of the operator commands, which talk to a
// running server over HTTP.
type clientOptions struct {
	getenv  func(string) string
	url     string
	data    string
	timeout time.Duration
}

func (o *clientOptions) addFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&o.url, "url", "http://"+DefaultAddr, "base URL of the running n8n-guard")
	fs.StringVar(&o.data, "data", DefaultDataDir, "data folder whose api-token is used when N8N_GUARD_TOKEN is not set")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of each HTTP call")
	bindEnv(fs, "url", "N8N_GUARD_URL")
	bindEnv(fs, "data", "N8N_GUARD_DATA")
}

// client is a minimal client of the v1 API.
type client struct {
	base  string
	token string
	http  *http.Client
}

func (o *clientOptions) client() *client {
	return &client{base: strings.TrimRight(o.url, "/"), http: &http.Client{Timeout: o.timeout}}
}

// authed adds the token: N8N_GUARD_TOKEN, else the first of
// N8N_GUARD_TOKENS, else <data>/api-token.
func (o *clientOptions) authed() (*client, error) {
	c := o.client()
	if c.token = strings.TrimSpace(o.getenv("N8N_GUARD_TOKEN")); c.token != "" {
		return c, nil
	}
	if toks := splitTokens(o.getenv("N8N_GUARD_TOKENS")); len(toks) > 0 {
		c.token = toks[0]
		return c, nil
	}
	tok, err := readToken(filepath.Join(o.data, TokenFile))
	if err != nil {
		return nil, fmt.Errorf("no API token: set N8N_GUARD_TOKEN or point --data at the server's data folder (%w)", err)
	}
	c.token = tok
	return c, nil
}

// problemError is an error answer of the server.
type problemError problem.Problem

func (p *problemError) Error() string {
	msg := fmt.Sprintf("%s (HTTP %d): %s", p.Code, p.Status, p.Detail)
	for _, f := range p.Fields {
		msg += fmt.Sprintf("\n  %s: %s", f.Field, f.Rule)
	}
	return msg
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("n8n-guard at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var p problemError
		if json.Unmarshal(raw, &p) == nil && p.Code != "" {
			return &p
		}
		return fmt.Errorf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	return json.Unmarshal(raw, out)
}

func newKeysCmd(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "Inspect and resolve keys of a running n8n-guard",
	}
	o.addFlags(cmd)
	cmd.AddCommand(newKeysListCmd(o), newKeysShowCmd(o), newKeysResolveCmd(o))
	return cmd
}

func newKeysListCmd(o *clientOptions) *cobra.Command {
	var (
		namespace, state string
		limit            int
		all, asJSON      bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List keys, e.g. the queue of unknown keys a person must resolve",
		Example: `  n8n-guard keys list --state unknown
  n8n-guard keys list --namespace crm-contacts --state failed --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			var items []*keystore.Record
			cursor := ""
			for {
				q := url.Values{}
				for k, v := range map[string]string{"namespace": namespace, "state": state, "cursor": cursor} {
					if v != "" {
						q.Set(k, v)
					}
				}
				if limit > 0 {
					q.Set("limit", fmt.Sprint(limit))
				}
				var page struct {
					Items      []*keystore.Record `json:"items"`
					NextCursor string             `json:"next_cursor"`
				}
				if err := c.do(cmd.Context(), http.MethodGet, "/v1/keys?"+q.Encode(), nil, &page); err != nil {
					return err
				}
				items = append(items, page.Items...)
				if !all || page.NextCursor == "" {
					cursor = page.NextCursor
					break
				}
				cursor = page.NextCursor
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"items": items, "next_cursor": cursor})
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAMESPACE\tKEY\tSTATE\tATTEMPT\tOWNER\tUPDATED\tREASON")
			for _, r := range items {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.Namespace, r.Key, r.State, r.Attempt,
					r.Owner, r.UpdatedAt.UTC().Format(time.RFC3339), r.Reason)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if cursor != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "more keys: --all, or --limit larger than %d\n", limit)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&namespace, "namespace", "", "only this namespace")
	fs.StringVar(&state, "state", "", "only this state: reserved, completed, failed or unknown")
	fs.IntVar(&limit, "limit", 100, "keys per page (at most 1000)")
	fs.BoolVar(&all, "all", false, "follow next_cursor through every page")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

func newKeysShowCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show NAMESPACE KEY",
		Short: "Show a key's record and history",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			var rec json.RawMessage
			q := url.Values{"namespace": {args[0]}, "key": {args[1]}}
			if err := c.do(cmd.Context(), http.MethodGet, "/v1/lookup?"+q.Encode(), nil, &rec); err != nil {
				return err
			}
			var buf bytes.Buffer
			if err := json.Indent(&buf, rec, "", "  "); err != nil {
				return err
			}
			buf.WriteByte('\n')
			_, err = buf.WriteTo(cmd.OutOrStdout())
			return err
		},
	}
}

func newKeysResolveCmd(o *clientOptions) *cobra.Command {
	var (
		completed, failed, force bool
		by, note, resultRef      string
	)
	cmd := &cobra.Command{
		Use:   "resolve NAMESPACE KEY (--completed | --failed) --by NAME --note TEXT",
		Short: "Record a person's decision about a key (usually one in state unknown)",
		Long: `Record a person's decision about a key.

--completed: the side effect did take effect; the key is done and later
reserves answer duplicate_event.
--failed: it did not take effect; the next reserve may try again.`,
		Example: `  n8n-guard keys resolve booking-confirmations B-1042 --completed \
    --by "office manager" --note "checked the Sent folder: mail went out"`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.authed()
			if err != nil {
				return err
			}
			resolution := keystore.StateCompleted
			if failed {
				resolution = keystore.StateFailed
			}
			body := map[string]any{
				"namespace": args[0], "key": args[1], "resolution": resolution,
				"by": by, "note": note, "force": force,
			}
			if resultRef != "" {
				body["result_ref"] = resultRef
			}
			var a struct {
				Outcome   string `json:"outcome"`
				State     string `json:"state"`
				Attempt   int    `json:"attempt"`
				Retryable bool   `json:"retryable"`
			}
			if err := c.do(cmd.Context(), http.MethodPost, "/v1/resolve", body, &a); err != nil {
				var p *problemError
				if errors.As(err, &p) && p.Code == errs.Conflict && !force && strings.Contains(p.Detail, "reserved by a live attempt") {
					return fmt.Errorf("%w\n(a live reservation is only overridden with --force)", err)
				}
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s/%s: %s (state %s, attempt %d", args[0], args[1], a.Outcome, a.State, a.Attempt)
			if a.State == string(keystore.StateFailed) && a.Retryable {
				fmt.Fprint(cmd.OutOrStdout(), ", the next reserve may try again")
			}
			fmt.Fprintln(cmd.OutOrStdout(), ")")
			return nil
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&completed, "completed", false, "the side effect took effect")
	fs.BoolVar(&failed, "failed", false, "the side effect did not take effect; allow a new attempt")
	fs.StringVar(&by, "by", "", "who decided (required)")
	fs.StringVar(&note, "note", "", "what was checked and decided (required)")
	fs.StringVar(&resultRef, "result-ref", "", "reference of the result, e.g. the ID the target system gave (with --completed)")
	fs.BoolVar(&force, "force", false, "also resolve a key whose reservation is still live")
	cmd.MarkFlagsMutuallyExclusive("completed", "failed")
	cmd.MarkFlagsOneRequired("completed", "failed")
	_ = cmd.MarkFlagRequired("by")
	_ = cmd.MarkFlagRequired("note")
	return cmd
}
