package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/n8n-guard/n8n-guard/api"
	"github.com/n8n-guard/n8n-guard/api/access"
	"github.com/n8n-guard/n8n-guard/api/console"
	"github.com/n8n-guard/n8n-guard/api/openid"
	"github.com/n8n-guard/n8n-guard/internal/durable"
	"github.com/n8n-guard/n8n-guard/keystore"
)

// ConsoleFileConfig is the console: section: named sign-in through an
// identity provider and the roles of its people (docs/console.md).
type ConsoleFileConfig struct {
	OIDC *OIDCConfig `yaml:"oidc"`
	// People: the first rule naming the person or one of their groups
	// gives their role (read, decide or admin) and namespaces.
	People []PersonConfig `yaml:"people"`
	// SharedTokenSignIn: false turns the API token sign-in off (then
	// oidc is required). Default on.
	SharedTokenSignIn *bool `yaml:"shared_token_sign_in"`
}

// OIDCConfig is console.oidc. The client secret is never in the file:
// client_secret_env names the variable, or client_secret_file the file
// (a mounted secret), that holds it.
type OIDCConfig struct {
	Issuer           string   `yaml:"issuer"`
	ClientID         string   `yaml:"client_id"`
	ClientSecretEnv  string   `yaml:"client_secret_env"`
	ClientSecretFile string   `yaml:"client_secret_file"`
	RedirectURL      string   `yaml:"redirect_url"`
	Scopes           []string `yaml:"scopes"`
	NameClaim        string   `yaml:"name_claim"`
	GroupsClaim      string   `yaml:"groups_claim"`
	// ProviderName labels the sign-in button ("Sign in with Google").
	ProviderName string `yaml:"provider_name"`
	// EmailVerifiedOptional: this provider never sends email_verified, so
	// an ID token without it signs in by e-mail (openid.Config).
	EmailVerifiedOptional bool `yaml:"email_verified_optional"`
}

// PersonConfig is one rule of console.people.
type PersonConfig struct {
	Person     string   `yaml:"person"`
	Group      string   `yaml:"group"`
	Role       string   `yaml:"role"`
	Namespaces []string `yaml:"namespaces"`
}

// ConsoleSignIn resolves console: into the API's console configuration,
// reading the client secret with getenv or readFile. The session key is
// not part of it (consoleSessionKey, at start).
func (fc FileConfig) ConsoleSignIn(getenv func(string) string, readFile func(string) ([]byte, error)) (api.ConsoleConfig, error) {
	cc := fc.Console
	var out api.ConsoleConfig
	for _, p := range cc.People {
		out.People = append(out.People, access.PersonRule{Person: strings.TrimSpace(p.Person), Group: p.Group, Role: access.Role(p.Role), Namespaces: p.Namespaces})
	}
	if err := out.People.Check(keystore.ValidNamespace); err != nil {
		return out, fmt.Errorf("console.people: %w", err)
	}
	out.NoTokenSignIn = cc.SharedTokenSignIn != nil && !*cc.SharedTokenSignIn
	if cc.OIDC == nil {
		if out.NoTokenSignIn {
			return out, errors.New("console.shared_token_sign_in: false needs console.oidc, or nobody could sign in")
		}
		if len(cc.People) > 0 {
			return out, errors.New("console.people: the rules need console.oidc (people sign in through an identity provider)")
		}
		return out, nil
	}
	o := cc.OIDC
	if len(cc.People) == 0 {
		return out, errors.New("console.people: give at least one rule (person or group, and role), or nobody may sign in through console.oidc")
	}
	var secret string
	switch {
	case (o.ClientSecretEnv == "") == (o.ClientSecretFile == ""):
		return out, errors.New("console.oidc: give exactly one of client_secret_env (the variable that holds the client secret) or client_secret_file")
	case o.ClientSecretEnv != "":
		if secret = strings.TrimSpace(getenv(o.ClientSecretEnv)); secret == "" {
			return out, fmt.Errorf("console.oidc.client_secret_env: the variable %s is not set", o.ClientSecretEnv)
		}
	default:
		b, err := readFile(o.ClientSecretFile)
		if err != nil {
			return out, fmt.Errorf("console.oidc.client_secret_file: %w", err)
		}
		if secret = strings.TrimSpace(string(b)); secret == "" {
			return out, fmt.Errorf("console.oidc.client_secret_file: %s is empty", o.ClientSecretFile)
		}
	}
	p, err := openid.New(openid.Config{Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret, RedirectURL: o.RedirectURL,
		Scopes: o.Scopes, NameClaim: o.NameClaim, GroupsClaim: o.GroupsClaim, EmailVerifiedOptional: o.EmailVerifiedOptional})
	if err != nil {
		return out, fmt.Errorf("console.oidc.%w", err)
	}
	out.OpenID, out.ProviderName = p, o.ProviderName
	return out, nil
}

// ConsoleKeyFile keeps the key that seals the console's session cookies,
// so that sessions survive a restart. Replicas behind one address need the
// same file; deleting it signs everybody out.
const ConsoleKeyFile = "console-session-key"

// ConsoleSignOutFile keeps the console's sign-outs, so that a signed-out
// cookie stays refused after a restart until it would have expired (at
// most one session TTL of entries, compacted at start).
const ConsoleSignOutFile = "console-signouts"

// consoleSessionKey reads <data>/console-session-key, or creates it.
func consoleSessionKey(dataDir string, log *slog.Logger) ([]byte, error) {
	path := filepath.Join(dataDir, ConsoleKeyFile)
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			if len(b) != console.SessionKeySize {
				return nil, fmt.Errorf("console session key %s has %d bytes, want %d: delete it to have a new one made (everybody signs in again)", path, len(b), console.SessionKeySize)
			}
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("console session key %s cannot be read: %w", path, err)
		}
		key := make([]byte, console.SessionKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		err = durable.WriteNew(path, key)
		if err == nil {
			log.Info("console: made the key that seals session cookies", "path", path)
			return key, nil
		}
		if !errors.Is(err, fs.ErrExist) { // another process made it first: read that one
			return nil, fmt.Errorf("console session key %s: %w", path, err)
		}
	}
	return nil, fmt.Errorf("console session key %s: cannot be read or made", path)
}
