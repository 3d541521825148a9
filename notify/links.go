package notify

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// Link is a button that opens a page of the guard's console.
type Link struct {
	Label string
	URL   string
}

// consoleLinks are the console pages a message links to, under the guard's
// public URL base (none when base is empty): a key's page, a group's
// search and bulk decision (the keys the group is defined by, as a
// keystore.Filter), a destination's page for an outage.
func consoleLinks(r *Record, base string) []Link {
	if base == "" {
		return nil
	}
	base = strings.TrimRight(base, "/")
	kind := r.Kind
	if kind == KindEscalation {
		kind = r.EscalatedKind
	}
	key := func() []Link {
		return []Link{{"Open in console", base + "/ui/key?" + url.Values{"namespace": {r.Namespace}, "key": {r.Key}}.Encode()}}
	}
	group := func(f keystore.Filter) []Link {
		q := f.Query().Encode()
		return []Link{
			{"Open in console", base + "/ui/keys?search=1&" + q},
			{"Decide in console", base + "/ui/bulk?" + q},
		}
	}
	switch kind {
	case KindKeyUnknown:
		if r.Kind == KindKeyUnknown && r.IsKeyGroup() {
			return group(keystore.Filter{Namespace: r.Namespace, States: []keystore.State{keystore.StateUnknown}})
		}
		return key()
	case KindParkedLost, KindParkedOverdue:
		if r.Count > 1 {
			f := keystore.Filter{Namespace: r.Namespace, Destination: r.Destination, States: []keystore.State{keystore.StateParked}}
			if kind == KindParkedLost {
				f.Reason = keystore.ReasonResumeLost // only the keys n8n lost, never the ones still waiting
			}
			return group(f)
		}
		return key()
	case KindRerunRefused:
		if r.Count > 1 {
			return group(keystore.Filter{Namespace: r.Namespace, States: []keystore.State{keystore.StateFailed}})
		}
		return key()
	case KindApproval, KindRecordDamaged:
		return key()
	case KindBreakerOpened, KindBreakerClosed:
		return []Link{{"Open in console", base + "/ui/destination?" + url.Values{"name": {r.Destination}}.Encode()}}
	case KindWorkflowFailed:
		return []Link{{"Open in console", base + "/ui/failures"}}
	}
	return nil
}

// CheckPublicURL refuses a public URL that is not an absolute http(s) URL
// without query or fragment (Slack refuses a button with a bad URL, and
// every link is built by appending a path to it).
func CheckPublicURL(u string) error {
	if u == "" {
		return nil
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" || p.Fragment != "" || p.User != nil {
		return fmt.Errorf("public_url %q must be the absolute http(s) address people open the guard at, e.g. https://guard.example.org (no query, no credentials)", u)
	}
	return nil
}
