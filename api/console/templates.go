package console

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"time"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// pageNames are the templates/<name>.html files; each defines "content"
// and is drawn inside layout.html, with the pieces of parts.html.
var pageNames = []string{"overview", "signin", "search", "key", "breakers", "destination", "parked", "notifications", "error", "signedin", "audit", "approvals", "bulk", "failures"}

func parsePages(funcs template.FuncMap) (map[string]*template.Template, error) {
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parse %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// templateFuncs format times (ages by the console's clock) and build
// links; the templates never build markup from data (html/template
// escapes every value as text).
func templateFuncs(now func() time.Time, refresh template.HTMLAttr) template.FuncMap {
	return template.FuncMap{
		"refresh": func() template.HTMLAttr { return refresh },
		// Set by New, which knows the notifications' routes.
		"keyOwner":         func(string) ownerRef { return ownerRef{} },
		"destinationOwner": func(string) ownerRef { return ownerRef{} },
		"approvers":        func(string) []person { return nil },
		"when":             when,
		"age":              func(t time.Time) string { return span(now().Sub(t)) },
		"until":            func(t time.Time) string { return until(t.Sub(now())) },
		"asset":            assetURL,
		"keyURL":           keyURL,
		"destinationURL":   destinationURL,
		// Codes in words: the lists say what happened, the raw code
		// stays in a title for whoever searches by it.
		"reasonWords":  keystore.ReasonWords,
		"breakerWords": func(b keystore.Breaker) string { return keystore.BreakerWords(b, now()) },
		"kindWords":    kindWords,
		"historyWords": keystore.HistoryWords,
	}
}

// refreshAttr is the attribute of <main> that asks console.js to fetch
// the page again every so often: data-refresh="seconds", or nothing when
// every is negative (Config.Refresh, its default filled in).
func refreshAttr(every time.Duration) template.HTMLAttr {
	if every < 0 {
		return ""
	}
	return template.HTMLAttr(fmt.Sprintf(`data-refresh="%d"`, max(1, int(every.Seconds()))))
}

// when writes a moment as <time datetime="RFC 3339">UTC text</time>;
// console.js rewrites the text in the reader's time zone and keeps the UTC
// text as the title. In an attribute html/template strips the tags, so
// title="{{when .}}" reads the UTC text.
func when(t any) template.HTML {
	var at time.Time
	switch v := t.(type) {
	case time.Time:
		at = v
	case *time.Time:
		if v == nil {
			return ""
		}
		at = *v
	default:
		return ""
	}
	if at.IsZero() {
		return ""
	}
	at = at.UTC()
	// Both strings are digits, dashes, colons and letters from the layouts:
	// nothing to escape.
	return template.HTML(`<time datetime="` + at.Format(time.RFC3339) + `">` + at.Format("2006-01-02 15:04:05 UTC") + `</time>`)
}

func until(d time.Duration) string {
	if d <= 0 {
		return "due now"
	}
	return "in " + span(d)
}

// span says a duration the way a person reads it: the two largest units.
func span(d time.Duration) string {
	d = max(d, 0).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// assetURL names a static file with its content's hash (?v=), so a browser
// may keep it for a year and still fetches the new one after an upgrade.
func assetURL(name string) string {
	return Prefix + "/static/" + name + "?v=" + assetVersion(name)
}

func assetVersion(name string) string {
	b, err := fs.ReadFile(staticFiles, "static/"+name)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}
