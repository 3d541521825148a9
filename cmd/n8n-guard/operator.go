package main

import (
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/n8n-guard/n8n-guard/client"
	"github.com/n8n-guard/n8n-guard/errs"
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

func (o *clientOptions) client() *client.Client {
	return client.New(o.url, client.Options{Timeout: o.timeout})
}

// authed is a client with the guard's token (guardToken).
func (o *clientOptions) authed() (*client.Client, error) {
	tok, err := guardToken(o.getenv, o.data)
	if err != nil {
		return nil, fmt.Errorf("no API token: set N8N_GUARD_TOKEN or point --data at the server's data folder (%w)", err)
	}
	return client.New(o.url, client.Options{Token: tok, Timeout: o.timeout}), nil
}

// guardToken is the token a command talks to the guard with:
// N8N_GUARD_TOKEN, else the first of N8N_GUARD_TOKENS, else
// <data>/api-token.
func guardToken(getenv func(string) string, data string) (string, error) {
	if tok := strings.TrimSpace(getenv("N8N_GUARD_TOKEN")); tok != "" {
		return tok, nil
	}
	if toks := splitTokens(getenv("N8N_GUARD_TOKENS")); len(toks) > 0 {
		return toks[0], nil
	}
	return readToken(filepath.Join(data, TokenFile))
}

// decider is who the operator commands that decide say decides: --by,
// else $N8N_GUARD_PERSON, else the OS user's name. The last is a guess:
// a token that names its person decides as that person, and the server
// refuses a by naming someone else, so a guessed name is sent again left
// out (decide). A shared token records what is sent as
// "<by> (via shared token <name>)".
type decider struct {
	by      string
	guessed bool
}

func (o *clientOptions) decider(flag string) decider {
	if by := strings.TrimSpace(flag); by != "" {
		return decider{by: by}
	}
	if by := strings.TrimSpace(o.getenv("N8N_GUARD_PERSON")); by != "" {
		return decider{by: by}
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return decider{by: u.Username, guessed: true}
	}
	return decider{}
}

// decide runs call with the decider's by; when that was only guessed and
// the token names its own person (403, field by, rule token_person:
// nothing changed), once more without by.
func decide[T any](d decider, call func(by string) (T, error)) (T, error) {
	out, err := call(d.by)
	var e *client.Error
	if d.guessed && errors.As(err, &e) && e.Problem != nil &&
		slices.ContainsFunc(e.Problem.Fields, func(f errs.FieldError) bool { return f.Field == "by" && f.Rule == "token_person" }) {
		return call("")
	}
	return out, err
}
