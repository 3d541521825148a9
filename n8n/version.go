package n8n

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// Version is what the guard knows of an instance's n8n.
type Version struct {
	Major, Minor, Patch int
	// Exact is false when n8n did not say its version (2.x tells it only to
	// a logged-in user) and the major was inferred.
	Exact bool
}

func (v Version) String() string {
	if !v.Exact {
		return fmt.Sprintf("%d.x", v.Major)
	}
	return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
}

// The n8n the commands are proven against (e2e suite): 1.113 and later
// 1.x, and 2.x.
const (
	oldestMajor, oldestMinor = 1, 113
	newestMajor              = 2
)

// Supported refuses versions the commands were never run against: a 1.x
// before 1.113 and anything after 2.x, whose API may publish differently.
func (v Version) Supported() error {
	old := v.Major < oldestMajor || (v.Major == oldestMajor && v.Minor < oldestMinor)
	if old || v.Major > newestMajor {
		return fmt.Errorf("n8n %s is not supported: n8n-guard n8n works with n8n %d.%d and later 1.x, and with 2.x (proven on 1.113.3 and 2.41.1)",
			v, oldestMajor, oldestMinor)
	}
	return nil
}

// Version reads the settings n8n's login page reads, the one place
// without a login that tells a version: 1.x answers versionCli; 2.x answers
// only public settings (settingsMode "public") without it.
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
		var v Version
		if _, err := fmt.Sscanf(s.Data.VersionCli, "%d.%d.%d", &v.Major, &v.Minor, &v.Patch); err != nil {
			return Version{}, fmt.Errorf("n8n says it is version %q, which setup cannot read", s.Data.VersionCli)
		}
		v.Exact = true
		return v, nil
	}
	if s.Data.SettingsMode == "public" {
		return Version{Major: 2}, nil
	}
	return Version{}, fmt.Errorf("n8n at %s did not say its version: is it n8n 1.113 or later?", c.base)
}
