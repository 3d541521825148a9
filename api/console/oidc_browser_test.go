package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/api/openid/openidtest"
)

// In chromium: a person signs in through the identity provider, types a
// decision, the guard restarts before they send it, and the decision is
// recorded under their name; the audit list shows it.
// The provider is another site (localhost) with a login page: the browser
// comes back by a cross-site navigation, after which a redirect would not
// carry the SameSite=Strict session cookie.
// Mutations tried: session.by() naming the OIDC person as "console:
// <name>": the history row check fails; the callback redirecting at once
// instead of its signed-in page: the overview never shows (back to the
// sign-in).
func TestBrowserPersonSignsInAndDecidesAcrossARestart(t *testing.T) {
	o := newOIDCSite(t)
	o.unknownKey("bookings", "bk-0042", "n8n exec 4711", "timeout after 30s")
	o.issuer.SignIn(openidtest.Person{Email: "ana@example.com"})
	o.issuer.LoginPage = true
	b := newBrowser(t, o.site, 1280, 900)
	b.run("open sign-in", chromedp.Navigate(o.url+"/ui"), chromedp.WaitVisible(chromedp.CSS(`#signin-oidc`)))
	b.shot("signin")
	if got := b.text(`#token-h`); got != "With a shared token" {
		t.Errorf("the token sign-in is headed %q, want it named a shared token", got)
	}
	b.run("sign in with the provider",
		chromedp.Click(chromedp.CSS(`#signin-oidc`)),
		chromedp.WaitVisible(chromedp.CSS(`#approve`)),
		chromedp.Click(chromedp.CSS(`#approve`)),
		chromedp.WaitVisible(chromedp.CSS(`#waiting-h`)))
	if got := b.text(`#who`); !strings.Contains(got, "ana@example.com") || !strings.Contains(got, "signed in with OIDC") || !strings.Contains(got, "may decide") {
		t.Errorf("header says %q, want the person, OIDC and their role", got)
	}
	b.shot("overview")
	b.openKey("bookings", "bk-0042", `#resolve-form`)
	b.run("type the decision",
		chromedp.Click(chromedp.CSS(`input[name=action][value=retry]`)),
		chromedp.SendKeys(chromedp.CSS(`#note`), "the CRM has no contact: let it retry"))
	o.restart(t)
	b.run("send it after the restart",
		chromedp.Click(chromedp.CSS(`#resolve-submit`)),
		chromedp.WaitVisible(chromedp.CSS(`.done`)))
	b.shot("decided")
	if got := b.text(`#history tbody tr:first-child`); !strings.Contains(got, "ana@example.com (console, OIDC)") || !strings.Contains(got, "let it retry") {
		t.Errorf("newest history row %q: want the person and the reason", got)
	}
	if r := o.lookup("bookings", "bk-0042"); r.ResolvedBy != "ana@example.com (console, OIDC)" {
		t.Errorf("resolved by %q", r.ResolvedBy)
	}
	b.run("audit", chromedp.Navigate(o.url+"/ui/audit"), chromedp.WaitVisible(chromedp.CSS(`#audit`)))
	b.shot("audit")
	if got := b.text(`#audit tbody tr:first-child`); !strings.Contains(got, "ana@example.com (console, OIDC)") || !strings.Contains(got, "bookings / bk-0042") {
		t.Errorf("newest audit row %q", got)
	}
}
