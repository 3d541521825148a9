package console_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// console.js is served as JavaScript from the console's own origin; the
// pages name it (and the stylesheet) with their content's hash, so that
// address may be kept a year and an upgrade is fetched at once; any other
// address of it is checked again each time.
func TestLookAssetsAndTheirCaching(t *testing.T) {
	s := newSite(t)
	c, _ := signedIn(t, s, actToken)
	resp, page := fetch(t, c, s.url+"/ui")
	if got := resp.Header.Get("Content-Security-Policy"); got != consoleCSP {
		t.Errorf("CSP %q, want %q", got, consoleCSP)
	}
	for _, asset := range []struct{ name, typ string }{{"console.js", "text/javascript"}, {"console.css", "text/css"}} {
		m := regexp.MustCompile(`(?:src|href)="(/ui/static/` + regexp.QuoteMeta(asset.name) + `\?v=[0-9a-f]{12})"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the overview does not name %s with its hash:\n%s", asset.name, page)
		}
		resp, body := fetch(t, c, s.url+m[1])
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), asset.typ) || len(body) < 100 {
			t.Errorf("%s: %d %q, %d bytes", m[1], resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
		}
		if got := resp.Header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control %q", m[1], got)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: not nosniff", m[1])
		}
		for _, u := range []string{"/ui/static/" + asset.name, "/ui/static/" + asset.name + "?v=000000000000"} {
			if resp, _ := fetch(t, c, s.url+u); resp.Header.Get("Cache-Control") != "no-cache" {
				t.Errorf("%s: Cache-Control %q, want no-cache", u, resp.Header.Get("Cache-Control"))
			}
		}
	}
	if resp, _ := fetch(t, c, s.url+"/ui/static/nothing.js"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("a missing asset: %d", resp.StatusCode)
	}
}

// `when` writes <time datetime> with the UTC text; in an attribute it is
// the text alone.
func TestLookWhenWritesTimeElements(t *testing.T) {
	s := newSite(t)
	s.unknownKey("bookings", "bk-1", "n8n exec 1", "timeout")
	c, _ := signedIn(t, s, actToken)
	resp, err := c.Get(s.url + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if !regexp.MustCompile(`<footer>.*<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>`).MatchString(page) {
		t.Errorf("the footer's time is not a <time datetime>:\n%s", page)
	}
	if !regexp.MustCompile(`title="since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"`).MatchString(page) {
		t.Errorf("a time in an attribute is not plain text:\n%s", page)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, " style=") {
		t.Error("the page has an inline script or style")
	}
}
