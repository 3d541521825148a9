package notify_test

import (
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/keystore"
	. "github.com/n8n-guard/n8n-guard/notify"
)

// refuse makes key a failed key whose execution waits at its re-run gate,
// has Ana allow its re-run, and notes n8n's refusal, as rerun.Runner does.
func (w *parkWorld) refuse(key, why string) {
	w.t.Helper()
	const exec = "n8n wf1 exec 42"
	res, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: exec})
	if err != nil || res.Outcome != keystore.OutcomeAccepted {
		w.t.Fatalf("reserve %s: %v %v", key, res.Outcome, err)
	}
	if _, err := w.store.Fail(w.ctx, keystore.FailRequest{Namespace: "crm-contacts", Key: key, Token: res.Token, Reason: keystore.ReasonDestinationFailed}); err != nil {
		w.t.Fatal(err)
	}
	if res, err := w.store.Reserve(w.ctx, keystore.ReserveRequest{Namespace: "crm-contacts", Key: key, Owner: exec, Rerun: true}); err != nil || res.Outcome != keystore.OutcomeRerunNotGranted {
		w.t.Fatalf("the gate of %s: %v %v", key, res.Outcome, err)
	}
	if _, err := w.store.Resolve(w.ctx, keystore.ResolveRequest{Namespace: "crm-contacts", Key: key, Resolution: keystore.StateFailed, Rerun: true, By: "Ana", Note: "CRM is back"}); err != nil {
		w.t.Fatal(err)
	}
	if _, ok, err := w.store.ClaimRerunHeld(w.ctx, "crm-contacts", key, "guard-a", time.Minute, time.Minute); err != nil || !ok {
		w.t.Fatalf("claim %s: %v %v", key, ok, err)
	}
	if ok, err := w.store.NoteRerun(w.ctx, "crm-contacts", key, keystore.HistoryRerunRefused, why); err != nil || !ok {
		w.t.Fatalf("note %s: %v %v", key, ok, err)
	}
}

func (w *parkWorld) refusedPosts() []slacktest.Call {
	var out []slacktest.Call
	for _, c := range w.slack.Delivered("chat.postMessage") {
		if strings.Contains(c.Shown(), "Re-run not started") {
			out = append(out, c)
		}
	}
	return out
}

// A re-run a person allowed that n8n refused is told to the namespace's
// owner: the person was told the guard re-runs it, and silence would
// leave the key failed with nobody knowing. Once per refusal (a restart
// repeats none), and a bulk refused at once is one message with a count.
func TestRefusedRerunToldToTheNamespaceOwner(t *testing.T) {
	t.Run("one refusal", func(t *testing.T) {
		w := newParkWorld(t)
		w.refuse("evt_r1", "n8n refused the re-run: HTTP 404 execution not found")
		w.step()
		posts := w.refusedPosts()
		if len(posts) != 1 {
			t.Fatalf("%d messages of the refusal, want 1", len(posts))
		}
		for _, want := range []string{"<@U0OFFICE>", "`evt_r1`", "`crm-contacts`", "*Ana* allowed", "HTTP 404 execution not found",
			"the key stays failed", "Allow it again in the console", "Open in console", "https://guard.example.org/ui/key?"} {
			if !strings.Contains(posts[0].Shown(), want) {
				t.Errorf("the message lacks %q:\n%s", want, posts[0].Shown())
			}
		}
		if !strings.Contains(posts[0].Text, "Re-run not started: key crm-contacts/evt_r1") || !strings.Contains(posts[0].Text, "HTTP 404") {
			t.Errorf("fallback text: %q", posts[0].Text)
		}
		// Allowed again and refused again: the person hears it again.
		w.clock.Advance(DefaultGroupWindow + time.Second)
		if _, err := w.store.Resolve(w.ctx, keystore.ResolveRequest{Namespace: "crm-contacts", Key: "evt_r1", Resolution: keystore.StateFailed, Rerun: true, By: "Bo", Note: "again"}); err != nil {
			t.Fatal(err)
		}
		if ok, err := w.store.NoteRerun(w.ctx, "crm-contacts", "evt_r1", keystore.HistoryRerunRefused, "the execution did not stop at its re-run gate"); err != nil || !ok {
			t.Fatalf("note again: %v %v", ok, err)
		}
		w.step()
		if posts := w.refusedPosts(); len(posts) != 2 || !strings.Contains(posts[1].Shown(), "*Bo* allowed") {
			t.Fatalf("%d messages after a second refusal, want 2", len(posts))
		}
		calls := len(w.slack.Calls())
		w.restart()
		w.step()
		w.step()
		for _, c := range w.slack.Calls()[calls:] {
			if c.Method == "chat.postMessage" && strings.Contains(c.Shown(), "Re-run not started") {
				t.Fatal("posted again after a restart")
			}
		}
	})
	t.Run("a bulk refused at once is one message with a count", func(t *testing.T) {
		w := newParkWorld(t)
		for _, key := range []string{"evt_b1", "evt_b2", "evt_b3"} {
			w.refuse(key, "n8n refused the re-run: HTTP 404 execution not found")
		}
		w.step()
		w.clock.Advance(DefaultGroupWindow)
		w.step()
		w.step()
		if posts := w.refusedPosts(); len(posts) != 1 {
			t.Fatalf("%d messages for 3 refusals, want 1", len(posts))
		}
		var shown string
		for _, c := range w.slack.Delivered("") {
			if strings.Contains(c.Shown(), "Re-run not started") {
				shown = c.Shown()
			}
		}
		if !strings.Contains(shown, "*3* re-runs in `crm-contacts` were not started") {
			t.Errorf("the message's last version does not count 3:\n%s", shown)
		}
	})
}
