package n8n

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
)

// Version is what the guard knows of an instance's n8n.
type Version struct {
	Major, Minor, Patch int
	// Exact is false when nobody said the version and the major was
	// inferred (AtLeast says so): 2.x and later tell it only to a logged-in
	// user, and n8n's public API (the API key) tells it to nobody.
	Exact bool
	// From says where the version was read (one of the From* constants);
	// every line that shows the version names it, so an inferred major is
	// never taken for a read one.
	From string
}

// Where a version was read.
const (
	FromSettings = "read from n8n's settings, GET /rest/settings"
	FromMetrics  = "read from n8n's metrics, GET /metrics"
	FromGiven    = "as given by --n8n-version"
	// FromInferred: n8n's login-free settings answered in the form 2.x and
	// later answer, without a version, and /metrics was off.
	FromInferred = "inferred: n8n told its version neither in its login-free settings (2.x and later tell it only to a logged-in user) nor at /metrics (off unless N8N_METRICS=true), and its public API tells it to no API key"
)

func (v Version) String() string {
	switch {
	case !v.Exact && v.From == FromInferred:
		return fmt.Sprintf("%d.x or later", v.Major)
	case !v.Exact:
		return fmt.Sprintf("%d.x", v.Major)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// ParseVersion reads a version as n8n writes it ("3.4.4", "v2.41.1"), or
// as a person gives a major ("3", "3.x").
func ParseVersion(s string) (Version, error) {
	m := versionRe.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("%q is not an n8n version (give e.g. 3.4.4 or 3.x)", s)
	}
	var v Version
	v.Major, _ = strconv.Atoi(m[1])
	if m[2] != "" && m[3] != "" {
		v.Minor, _ = strconv.Atoi(m[2])
		v.Patch, _ = strconv.Atoi(m[3])
		v.Exact = true
	}
	return v, nil
}

var versionRe = regexp.MustCompile(`^v?(\d+)(?:\.(?:x|(\d+)\.(\d+)(?:[-+].*)?))?$`)

// Version reads n8n's version where n8n tells it without a login: its
// settings (1.x answers versionCli), else its Prometheus metrics
// (n8n_version_info, when N8N_METRICS=true). n8n's public API, the one the
// API key opens, has no route that tells it. When neither says it and the
// settings are the login-free ones of 2.x and later, the version is
// "2.x or later", From FromInferred, and every line that shows it says so.
func (c *Client) Version(ctx context.Context) (Version, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/rest/settings", nil)
	if err != nil {
		return Version{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Version{}, fmt.Errorf("%w at %s: %v", ErrUnreachable, c.base, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	var s struct {
		Data struct {
			VersionCli   string `json:"versionCli"`
			SettingsMode string `json:"settingsMode"`
		} `json:"data"`
	}
	if resp.StatusCode/100 == 3 {
		return Version{}, fmt.Errorf("%s/rest/settings: %s", c.base, redirected(resp))
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &s) != nil {
		return Version{}, fmt.Errorf("%s/rest/settings answered HTTP %d without n8n's settings: is %s n8n?", c.base, resp.StatusCode, c.base)
	}
	if s.Data.VersionCli != "" {
		v, err := ParseVersion(s.Data.VersionCli)
		if err != nil || !v.Exact {
			return Version{}, fmt.Errorf("n8n says it is version %q, which setup cannot read", s.Data.VersionCli)
		}
		v.From = FromSettings
		return v, nil
	}
	if s.Data.SettingsMode != "public" {
		return Version{}, fmt.Errorf("n8n at %s did not say its version: is it n8n 1.113 or later?", c.base)
	}
	if v, ok := c.metricsVersion(ctx); ok {
		return v, nil
	}
	return Version{Major: 2, From: FromInferred}, nil
}

// metricsVersion reads n8n_version_info from n8n's /metrics; ok is false
// when metrics are off (404) or carry no version. Its prefix is n8n's
// N8N_METRICS_PREFIX (default n8n_); n8n_nodejs_version_info is Node's.
func (c *Client) metricsVersion(ctx context.Context) (Version, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return Version{}, false
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Version{}, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Version{}, false
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := metricVersionRe.FindSubmatch(sc.Bytes())
		if m == nil || bytes.HasSuffix(m[1], []byte("nodejs_")) {
			continue
		}
		v, err := ParseVersion(string(m[2]))
		if err != nil || !v.Exact {
			continue
		}
		v.From = FromMetrics
		return v, true
	}
	return Version{}, false
}

var metricVersionRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*?)version_info\{[^}]*\bversion="([^"]+)"`)
