package notify_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	. "github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/decision"

	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

// newGroupHarness is newKeysHarness with the config given.
func newGroupHarness(t testing.TB, cfg Config) *keysHarness {
	slack := slacktest.New(t)
	h := newHarness(t, slack, cfg)
	ks, err := bolt.Open(filepath.Join(t.TempDir(), "keys.db"), bolt.Options{Clock: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	h.opts.Events, h.opts.Keys = ks, ks
	h.wireKeys(ks, ks)
	return &keysHarness{harness: h, slack: slack, ks: ks}
}

// storm makes n keys of bookings go unknown inside one group window and
// returns the group's notification, once posted.
func (k *keysHarness) unknownStorm(n int) Notification {
	k.t.Helper()
	ctx := context.Background()
	for i := range n {
		key := fmt.Sprintf("booking-%03d", i)
		r, err := k.ks.Reserve(ctx, keystore.ReserveRequest{Namespace: "bookings", Key: key, Owner: "wf-bookings"})
		if err != nil {
			k.t.Fatal(err)
		}
		if _, err := k.ks.Fail(ctx, keystore.FailRequest{Namespace: "bookings", Key: key, Token: r.Token,
			Reason: keystore.ReasonOutcomeUnknown, Message: "timeout after 30 s"}); err != nil {
			k.t.Fatal(err)
		}
		k.clock.Advance(100 * time.Millisecond)
	}
	k.pass()
	items := k.list(StatusDelivered)
	if len(items) != 1 || items[0].Count != n || len(k.calls("chat.postMessage")) != 1 {
		k.t.Fatalf("%d unknown keys: want one message counting them, got %+v", n, items)
	}
	return items[0]
}

var buttonValueRE = regexp.MustCompile(`"value":"(n_[0-9a-f]+\|[0-9]+\|[0-9]+)"`)

// lastShown is the message as Slack shows it now (the last post or update).
func (k *keysHarness) lastShown() slacktest.Call {
	k.t.Helper()
	var last slacktest.Call
	for _, c := range k.slack.Delivered("") {
		if c.Method == "chat.postMessage" || c.Method == "chat.update" {
			last = c
		}
	}
	return last
}

func (k *keysHarness) resolved(key string) []keystore.Transition {
	var out []keystore.Transition
	for _, h := range k.key(key).History {
		if h.Event == keystore.HistoryResolved {
			out = append(out, h)
		}
	}
	return out
}

// A group of 50 stuck keys is decided by one click (behind a confirmation
// naming the count); every open key is decided exactly once, keys decided
// elsewhere are left as they are, the buttons stay while any key is open,
// and a replayed or late click changes nothing.
func TestGroupDecision(t *testing.T) {
	cfg := decisionConfig()
	cfg.PublicURL = "https://guard.example.org"
	k := newGroupHarness(t, cfg)
	ctx := context.Background()
	n := k.unknownStorm(50)
	post := k.calls("chat.postMessage")[0]
	for _, want := range []string{"*50 of 50 still open.*", `"confirm":`, "Decide all 50 keys as completed?", "Mark 50 completed",
		"guard_complete", "guard_retry", "guard_ack",
		"https://guard.example.org/ui/keys?search=1\u0026namespace=bookings\u0026state=unknown",
		"https://guard.example.org/ui/bulk?namespace=bookings\u0026state=unknown"} {
		if !strings.Contains(post.Blocks, want) {
			t.Fatalf("the group's message lacks %q:\n%s", want, post.Blocks)
		}
	}

	// Five keys are decided elsewhere (the API, the console): the message
	// keeps its buttons and says how many are open.
	for i := range 5 {
		if _, err := k.ks.Resolve(ctx, keystore.ResolveRequest{Namespace: "bookings", Key: fmt.Sprintf("booking-%03d", i),
			Resolution: keystore.StateCompleted, By: "office manager", Note: "found it in the Sent folder"}); err != nil {
			t.Fatal(err)
		}
	}
	k.pass()
	k.clock.Advance(DefaultGroupWindow)
	k.pass()
	shown := k.lastShown()
	if shown.Method != "chat.update" || shown.TS != post.TS || !strings.Contains(shown.Blocks, "*45 of 50 still open.*") ||
		!strings.Contains(shown.Blocks, "Decide all 45 keys as completed?") || !strings.Contains(shown.Raw, "guard_complete") {
		t.Fatalf("after 5 keys decided elsewhere the message does not say 45 are open, with its buttons:\n%+v", shown)
	}
	// Two more are decided while the message is shown (their events not
	// read yet): the group's click must skip them, not decide them again.
	if _, err := k.ks.Resolve(ctx, keystore.ResolveRequest{Namespace: "bookings", Key: "booking-005",
		Resolution: keystore.StateFailed, By: "ops", Note: "no mail went out"}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.ks.Resolve(ctx, keystore.ResolveRequest{Namespace: "bookings", Key: "booking-006",
		Resolution: keystore.StateCompleted, By: "ops", Note: "mail is in the Sent folder"}); err != nil {
		t.Fatal(err)
	}

	m := buttonValueRE.FindStringSubmatch(shown.Blocks)
	if m == nil {
		t.Fatalf("no button value in %s", shown.Blocks)
	}
	// Slack rate-limits the update that shows the decision: it is shown
	// after Retry-After, nothing is decided twice meanwhile.
	k.slack.Script("429")
	hdr, body := signed(signingSecret, time.Now(), blockAction("U0OFFICE", ActionComplete, m[1]))
	if err := k.in.Interaction(ctx, hdr, body); err != nil {
		t.Fatal(err)
	}
	k.waitClicks()
	k.pass()
	k.pass()
	if last := k.slack.Calls()[len(k.slack.Calls())-1]; last.Answer != "429" {
		t.Fatalf("the fixture's 429 went to %+v", last)
	}
	k.clock.Advance(time.Minute)
	k.pass()
	for i := range 50 {
		key := fmt.Sprintf("booking-%03d", i)
		res := k.resolved(key)
		if len(res) != 1 {
			t.Fatalf("%s resolved %d times: %+v", key, len(res), k.key(key).History)
		}
		switch {
		case i < 5:
			if res[0].By != "office manager" {
				t.Fatalf("%s was decided again: %+v", key, res)
			}
		case i == 5:
			if k.key(key).State != keystore.StateFailed || res[0].By != "ops" {
				t.Fatalf("%s decided elsewhere meanwhile was changed: %s %+v", key, k.key(key).State, res)
			}
		case i == 6:
			if res[0].By != "ops" {
				t.Fatalf("%s decided elsewhere meanwhile was decided again: %+v", key, res)
			}
		default:
			if k.key(key).State != keystore.StateCompleted || !strings.Contains(res[0].By, "U0OFFICE") ||
				!strings.Contains(res[0].Detail, "bulk slack-"+n.ID) {
				t.Fatalf("%s: the group decision is not in its history with the person and the bulk id: %s %+v", key, k.key(key).State, res)
			}
		}
	}
	shown = k.lastShown()
	if !strings.Contains(shown.Blocks, "All 50 keys are decided.") || !strings.Contains(shown.Blocks, "<@U0OFFICE> marked 43 keys *completed*") ||
		!strings.Contains(shown.Blocks, "7 keys were decided elsewhere already") || strings.Contains(shown.Raw, "guard_") {
		t.Fatalf("the final message does not show the group decided, without buttons:\n%s", shown.Blocks)
	}
	history := func() (n int) {
		for i := range 50 {
			n += len(k.key(fmt.Sprintf("booking-%03d", i)).History)
		}
		return n
	}
	before, calls := history(), len(k.slack.Calls())

	// The same Slack request again: refused, nothing changes.
	err := k.in.Interaction(ctx, hdr, body)
	k.waitClicks()
	k.pass()
	if err == nil || !strings.Contains(err.Error(), "replay") || history() != before || len(k.slack.Calls()) != calls {
		t.Fatalf("a replayed click was taken: %v, history %d → %d", err, before, history())
	}
	// A late click (a new request from the message as it was shown
	// before): nothing changes, and the person is told.
	for _, action := range []string{ActionComplete, ActionRetry} {
		if err := k.click("U0HELPER", action, m[1]); err != nil {
			t.Fatal(err)
		}
	}
	eph := k.calls("chat.postEphemeral")
	if history() != before || len(eph) != 2 || !strings.Contains(eph[1].Text, "All 50 keys of this group are decided already; nothing changed.") {
		t.Fatalf("a late click changed something or was not answered: history %d → %d, %+v", before, history(), eph)
	}
}

// The same click delivered twice at once (Socket Mode resends an envelope
// it thinks was not acknowledged): the group is decided once, the second
// delivery is told it is out of date.
func TestGroupClickDeliveredTwice(t *testing.T) {
	k := newGroupHarness(t, decisionConfig())
	k.unknownStorm(20)
	m := buttonValueRE.FindStringSubmatch(k.calls("chat.postMessage")[0].Blocks)
	c := decision.Click{Action: ActionRetry, Value: m[1], UserID: "U0OFFICE", UserName: "Ana", Channel: "C0BOOK"}
	k.decider().Dispatch(c, c)
	k.waitClicks()
	k.pass()
	for i := range 20 {
		key := fmt.Sprintf("booking-%03d", i)
		if res := k.resolved(key); len(res) != 1 || k.key(key).State != keystore.StateFailed {
			t.Fatalf("%s: %s, resolved %d times", key, k.key(key).State, len(res))
		}
	}
	eph := k.calls("chat.postEphemeral")
	if len(eph) != 1 || !strings.Contains(eph[0].Text, "out of date") {
		t.Fatalf("the second delivery was not answered as out of date: %+v", eph)
	}
	if shown := k.lastShown(); !strings.Contains(shown.Blocks, "All 20 keys are decided.") || !strings.Contains(shown.Blocks, "*allowed a retry* of 20 keys") {
		t.Fatalf("final message: %s", shown.Blocks)
	}
}

// An escalation of a group carries the group's buttons, behind the same
// confirmation; they decide every open key of the group.
func TestGroupEscalationDecidesTheGroup(t *testing.T) {
	k := newGroupHarness(t, decisionConfig())
	k.unknownStorm(5)
	k.clock.Advance(31 * time.Minute)
	k.pass()
	posts := k.calls("chat.postMessage")
	esc := posts[len(posts)-1]
	if len(posts) != 2 || !strings.Contains(esc.Blocks, "*5* keys of `bookings` went *unknown*") ||
		!strings.Contains(esc.Blocks, "Decide all open keys of the 5 as completed?") {
		t.Fatalf("the escalation does not show the group's buttons: %s", esc.Blocks)
	}
	m := buttonValueRE.FindStringSubmatch(esc.Blocks)
	if err := k.click("U0BOSS", ActionComplete, m[1]); err != nil {
		t.Fatal(err)
	}
	k.pass()
	for i := range 5 {
		key := fmt.Sprintf("booking-%03d", i)
		if res := k.resolved(key); len(res) != 1 || !strings.Contains(res[0].By, "U0BOSS") {
			t.Fatalf("%s: %+v", key, k.key(key).History)
		}
	}
}
