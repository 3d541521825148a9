package console_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/n8n-guard/n8n-guard/keystore"
)

// The re-run in a real browser, on a desktop and a phone: the key page of
// a lead whose execution waits at its re-run gate offers "allow a retry
// and re-run" next to "allow a retry", within the screen; choosing it
// grants the re-run once and the page then says it waits for n8n.
func TestBrowserRerunFromTheKeyPage(t *testing.T) {
	for _, size := range []struct {
		name          string
		width, height int
	}{{"1280", 1280, 900}, {"390", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			kick := &kicks{}
			s := rerunSite(t, kick)
			s.gatedKey("crm", "lead-1", "n8n wf1 exec 42")
			b := newBrowser(t, s, size.width, size.height)
			if size.width < 800 {
				b.run("390 px", chromedp.EmulateViewport(390, 844))
			}
			b.signIn(actToken)
			b.openKey("crm", "lead-1", `#rerun-choice`)
			b.shot("rerun-offered")
			if bad := get(b, "measure", chromedp.Evaluate[[]string](offScreen)); len(bad) > 0 {
				t.Errorf("the key page at %s px: %s", size.name, strings.Join(bad, "; "))
			}
			order := get(b, "options", chromedp.Evaluate[[]string](`[...document.querySelectorAll('input[name=action]')].map(i => i.value)`))
			if i := indexOf(order, "retry"); i < 0 || i+1 >= len(order) || order[i+1] != "rerun" {
				t.Errorf("options %v: the re-run must follow allow a retry", order)
			}
			b.run("allow and re-run",
				chromedp.Click(chromedp.CSS(`input[name=action][value=rerun]`)),
				chromedp.SendKeys(chromedp.CSS(`#note`), "the CRM is back"),
				chromedp.Click(chromedp.CSS(`#resolve-submit`)),
				chromedp.WaitVisible(chromedp.CSS(`#rerun-status`)))
			b.shot("rerun-granted")
			if got := b.text(`#rerun-status`); !strings.Contains(got, "waiting for n8n") {
				t.Errorf("after the grant the page says %q", got)
			}
			if r := s.lookup("crm", "lead-1"); lastEvent(r) != keystore.HistoryRerunGranted || kick.n.Load() != 1 {
				t.Errorf("after the click: last event %s, %d kicks", lastEvent(r), kick.n.Load())
			}
		})
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
