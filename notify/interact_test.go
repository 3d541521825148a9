package notify_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/api/problem"
	"github.com/n8n-guard/n8n-guard/errs"
	. "github.com/n8n-guard/n8n-guard/notify"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
)

const signingSecret = "8f742231b10e8888abcd99yyyzzz85a5"

// signed is an interactivity request as Slack sends it: the payload
// form-encoded, signed with the app's signing secret at ts.
func signed(secret string, ts time.Time, payload any) (http.Header, []byte) {
	raw, _ := json.Marshal(payload)
	body := []byte("payload=" + url.QueryEscape(string(raw)))
	return slacktest.Sign(secret, ts, body), body
}

// blockAction is the block_actions payload of one button press.
func blockAction(user, action, id string) map[string]any {
	return map[string]any{
		"type":      "block_actions",
		"user":      map[string]any{"id": user, "username": strings.ToLower(user), "name": "name-of-" + user},
		"team":      map[string]any{"id": "T0TEAM"},
		"channel":   map[string]any{"id": "C0BOOK"},
		"container": map[string]any{"type": "message", "channel_id": "C0BOOK", "message_ts": "1700000000.000001"},
		"actions": []any{map[string]any{"type": "button", "action_id": action, "block_id": "decide",
			"value": id, "action_ts": "1700000000.1"}},
	}
}

func decisionConfig() Config {
	cfg := testConfig()
	cfg.Namespaces = map[string]Route{"bookings": {Owner: "U0OFFICE", Channel: "C0BOOK",
		Deciders: Deciders{Resolvers: []string{"U0HELPER", "S0OPS"},
			Escalation: []EscalationStep{{After: 30 * time.Minute, To: "U0BOSS"}, {After: time.Hour, To: "C0INCIDENT"}}}},
		// The orders team decides its namespace's keys (a re-run at the gate).
		"orders": {Owner: "U0ORDERS", Channel: "C0ORDERS"}}
	cfg.Owners = []OwnerRule{{Workflow: "orders-*", Owner: "U0ORDERS", Channel: "C0ORDERS",
		Deciders: Deciders{Escalation: []EscalationStep{{After: 30 * time.Minute, To: "S0OPS"}}}}}
	return cfg
}

// keysHarness is a harness whose notifications come from a real keystore
// (a bbolt file of its own) that the buttons resolve keys in.
type keysHarness struct {
	*harness
	slack *slacktest.Server
	ks    *bolt.Store
}

func newKeysHarness(t *testing.T) *keysHarness {
	slack := slacktest.New(t)
	slack.AddGroup("S0OPS", "U0OPS1", "U0OPS2")
	h := newHarness(t, slack, decisionConfig())
	ks, err := bolt.Open(filepath.Join(t.TempDir(), "keys.db"), bolt.Options{Clock: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	h.opts.Events, h.opts.Keys = ks, ks
	h.wireKeys(ks, ks)
	return &keysHarness{harness: h, slack: slack, ks: ks}
}

// unknownKey makes key go unknown and returns the notification about it,
// once posted.
func (k *keysHarness) unknownKey(key string) Notification {
	k.t.Helper()
	k.clock.Advance(DefaultGroupWindow + time.Second) // a group (and message) of its own
	ctx := context.Background()
	r, err := k.ks.Reserve(ctx, keystore.ReserveRequest{Namespace: "bookings", Key: key, Owner: "wf-bookings"})
	if err != nil {
		k.t.Fatal(err)
	}
	if _, err := k.ks.Fail(ctx, keystore.FailRequest{Namespace: "bookings", Key: key, Token: r.Token,
		Reason: keystore.ReasonOutcomeUnknown, Message: "timeout after 30 s"}); err != nil {
		k.t.Fatal(err)
	}
	k.pass()
	for _, it := range k.list(StatusDelivered) {
		if it.Kind == KindKeyUnknown {
			return it
		}
	}
	k.t.Fatalf("no delivered key_unknown notification: %+v", k.list(""))
	return Notification{}
}

// click presses a button as Slack would deliver it over HTTP, waits for
// the decision and runs one worker pass (the in-place update).
func (k *keysHarness) click(user, action, id string) error {
	hdr, body := signed(signingSecret, time.Now(), blockAction(user, action, id))
	err := k.in.Interaction(context.Background(), hdr, body)
	k.waitClicks()
	k.pass()
	return err
}

func (k *keysHarness) key(key string) *keystore.Record {
	k.t.Helper()
	res, err := k.ks.Lookup(context.Background(), "bookings", key)
	if err != nil || res.Record == nil {
		k.t.Fatalf("lookup %s: %v", key, err)
	}
	return res.Record
}

func (k *keysHarness) calls(method string) []slacktest.Call {
	var out []slacktest.Call
	for _, c := range k.slack.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func TestKeyButtons(t *testing.T) {
	cases := []struct {
		name, user, action string
		allowed            bool
		state              keystore.State // of the key afterwards
		shows              string         // in the updated message
	}{
		{"owner: it happened", "U0OFFICE", ActionComplete, true, keystore.StateCompleted, "marked it *completed*"},
		{"owner: it did not happen", "U0OFFICE", ActionRetry, true, keystore.StateFailed, "*allowed a retry*"},
		{"owner: leave it to me", "U0OFFICE", ActionAck, true, keystore.StateUnknown, "*acknowledged* it"},
		{"resolver: it happened", "U0HELPER", ActionComplete, true, keystore.StateCompleted, "marked it *completed*"},
		{"member of a resolver group: it did not happen", "U0OPS2", ActionRetry, true, keystore.StateFailed, "*allowed a retry*"},
		{"stranger: it happened", "U0STRANGER", ActionComplete, false, keystore.StateUnknown, ""},
		{"stranger: it did not happen", "U0STRANGER", ActionRetry, false, keystore.StateUnknown, ""},
		{"stranger: leave it to me", "U0STRANGER", ActionAck, false, keystore.StateUnknown, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeysHarness(t)
			n := k.unknownKey("booking-4711")
			post := k.calls("chat.postMessage")[0]
			for _, a := range []string{ActionComplete, ActionRetry, ActionAck} {
				if !strings.Contains(post.Raw, a) {
					t.Fatalf("the message has no %s button:\n%s", a, post.Blocks)
				}
			}
			if err := k.click(tc.user, tc.action, n.ID); err != nil {
				t.Fatal(err)
			}
			rec := k.key("booking-4711")
			if rec.State != tc.state {
				t.Fatalf("key is %s, want %s", rec.State, tc.state)
			}
			updates := k.calls("chat.update")
			eph := k.calls("chat.postEphemeral")
			if !tc.allowed {
				if len(updates) != 0 || len(eph) != 1 || !strings.Contains(eph[0].Text, "Not allowed — ask <@U0OFFICE>") {
					t.Fatalf("updates %d, ephemeral answers %+v", len(updates), eph)
				}
				if got := k.list("")[0]; got.Status != StatusDelivered || len(k.list("")) != 1 {
					t.Fatalf("a refused click changed the outbox: %+v", k.list(""))
				}
				return
			}
			if len(eph) != 0 || len(updates) != 1 {
				t.Fatalf("ephemeral %+v, updates %d", eph, len(updates))
			}
			u := updates[0]
			if u.TS != post.TS || u.Channel != "C0BOOK" || !strings.Contains(u.Blocks, tc.shows) ||
				!strings.Contains(u.Blocks, "<@"+tc.user+">") {
				t.Fatalf("update in place does not say who did what:\n%+v", u)
			}
			if tc.action != ActionAck && strings.Contains(u.Raw, "guard_") {
				t.Fatalf("buttons still there after the decision:\n%s", u.Blocks)
			}
			if tc.action != ActionAck {
				last := rec.History[len(rec.History)-1]
				if last.Event != keystore.HistoryResolved || !strings.Contains(last.By, tc.user) || !strings.Contains(rec.ResolvedBy, tc.user) {
					t.Fatalf("the key's history does not name the Slack user: %+v", last)
				}
			}
		})
	}
}

// A click on a key someone already resolved (from the API, by another
// person) says so and changes nothing.
func TestClickOnResolvedKey(t *testing.T) {
	k := newKeysHarness(t)
	n := k.unknownKey("booking-1")
	if _, err := k.ks.Resolve(context.Background(), keystore.ResolveRequest{Namespace: "bookings", Key: "booking-1",
		Resolution: keystore.StateCompleted, By: "office manager", Note: "checked the Sent folder"}); err != nil {
		t.Fatal(err)
	}
	before := len(k.key("booking-1").History)
	if err := k.click("U0OFFICE", ActionRetry, n.ID); err != nil {
		t.Fatal(err)
	}
	rec := k.key("booking-1")
	if rec.State != keystore.StateCompleted || len(rec.History) != before {
		t.Fatalf("a click on a resolved key changed it: %s, history %d → %d", rec.State, before, len(rec.History))
	}
	eph := k.calls("chat.postEphemeral")
	if len(eph) != 1 || !strings.Contains(eph[0].Text, "Already resolved: office manager decided `completed`") {
		t.Fatalf("ephemeral: %+v", eph)
	}
	// The message now shows who decided, without buttons.
	if u := k.calls("chat.update"); len(u) != 1 || !strings.Contains(u[0].Blocks, "office manager marked it *completed*") ||
		strings.Contains(u[0].Raw, "guard_") {
		t.Fatalf("the message does not say who resolved the key: %+v", u)
	}
	// Resolved to "failed" by someone else: "It did not happen" would be
	// accepted by the keystore again; the button refuses it.
	n3 := k.unknownKey("booking-3")
	if _, err := k.ks.Resolve(context.Background(), keystore.ResolveRequest{Namespace: "bookings", Key: "booking-3",
		Resolution: keystore.StateFailed, By: "ops", Note: "no mail went out"}); err != nil {
		t.Fatal(err)
	}
	before = len(k.key("booking-3").History)
	k.click("U0OFFICE", ActionRetry, n3.ID)
	if got := len(k.key("booking-3").History); got != before {
		t.Fatalf("history %d → %d: resolved twice", before, got)
	}
	// A second click after a decision from Slack: the first decider stays.
	n2 := k.unknownKey("booking-2")
	k.click("U0OFFICE", ActionComplete, n2.ID)
	updates := len(k.calls("chat.update"))
	k.click("U0HELPER", ActionComplete, n2.ID)
	if h := k.key("booking-2").History; h[len(h)-2].Event == keystore.HistoryResolved || !strings.Contains(h[len(h)-1].By, "U0OFFICE") {
		t.Fatalf("resolved twice: %+v", h)
	}
	eph = k.calls("chat.postEphemeral")
	if len(k.calls("chat.update")) != updates || !strings.Contains(eph[len(eph)-1].Text, "Already resolved") {
		t.Fatalf("the second click changed the message or was not told: %+v", eph)
	}
}

func TestFailureButtons(t *testing.T) {
	cases := []struct {
		name, user, action string
		allowed            bool
		shows              string
	}{
		{"owner acknowledges", "U0ORDERS", ActionAck, true, "*acknowledged* it"},
		{"owner snoozes", "U0ORDERS", ActionSnooze, true, "*snoozed* it until <!date^1796036400^{date_short_pretty} {time_secs}|2026-11-30 11:00:00 UTC>"},
		{"escalation group member acknowledges", "U0OPS1", ActionAck, true, "*acknowledged* it"},
		{"stranger acknowledges", "U0STRANGER", ActionAck, false, ""},
		{"stranger snoozes", "U0STRANGER", ActionSnooze, false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeysHarness(t)
			a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "77"))
			k.pass()
			post := k.calls("chat.postMessage")[0]
			if !strings.Contains(post.Raw, ActionAck) || !strings.Contains(post.Raw, ActionSnooze) {
				t.Fatalf("no Acknowledge / Snooze buttons:\n%s", post.Blocks)
			}
			k.click(tc.user, tc.action, a.NotificationID)
			updates := k.calls("chat.update")
			if !tc.allowed {
				eph := k.calls("chat.postEphemeral")
				if len(updates) != 0 || len(eph) != 1 || !strings.Contains(eph[0].Text, "Not allowed — ask <@U0ORDERS>") {
					t.Fatalf("updates %d, ephemeral %+v", len(updates), eph)
				}
				return
			}
			if len(updates) != 1 || !strings.Contains(updates[0].Blocks, tc.shows) || updates[0].TS != post.TS {
				t.Fatalf("updates: %+v", updates)
			}
		})
	}
}

func TestSignatures(t *testing.T) {
	now := time.Now()
	cases := []struct {
		name   string
		header func() (http.Header, []byte)
	}{
		{"unsigned", func() (http.Header, []byte) {
			_, b := signed(signingSecret, now, blockAction("U0OFFICE", ActionComplete, "x"))
			return http.Header{}, b
		}},
		{"signed with another secret", func() (http.Header, []byte) {
			return signed("not-the-secret", now, blockAction("U0OFFICE", ActionComplete, "x"))
		}},
		{"body changed after signing", func() (http.Header, []byte) {
			// A stranger's signed click, rewritten into the owner's.
			h, b := signed(signingSecret, now, blockAction("U0STRANGER", ActionComplete, "x"))
			forged := strings.ReplaceAll(strings.ReplaceAll(string(b), "U0STRANGER", "U0OFFICE"), "u0stranger", "u0office")
			if forged == string(b) || strings.Contains(forged, "STRANGER") || !strings.Contains(forged, "U0OFFICE") {
				panic("the body was not rewritten")
			}
			return h, []byte(forged)
		}},
		{"stale: six minutes old", func() (http.Header, []byte) {
			return signed(signingSecret, now.Add(-6*time.Minute), blockAction("U0OFFICE", ActionComplete, "x"))
		}},
		{"from the future", func() (http.Header, []byte) {
			return signed(signingSecret, now.Add(6*time.Minute), blockAction("U0OFFICE", ActionComplete, "x"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeysHarness(t)
			n := k.unknownKey("booking-9")
			hdr, body := tc.header()
			body = []byte(strings.Replace(string(body), "%22x%22", "%22"+n.ID+"%22", 1))
			err := k.in.Interaction(context.Background(), hdr, body)
			k.waitClicks()
			if errs.CodeOf(err) != problem.Unauthorized {
				t.Fatalf("want unauthorized, got %v", err)
			}
			if k.key("booking-9").State != keystore.StateUnknown || len(k.calls("chat.update"))+len(k.calls("chat.postEphemeral")) != 0 {
				t.Fatal("a refused request changed something")
			}
		})
	}
	t.Run("replayed", func(t *testing.T) {
		k := newKeysHarness(t)
		n := k.unknownKey("booking-10")
		hdr, body := signed(signingSecret, time.Now(), blockAction("U0OFFICE", ActionAck, n.ID))
		if err := k.in.Interaction(context.Background(), hdr, body); err != nil {
			t.Fatal(err)
		}
		if err := k.in.Interaction(context.Background(), hdr, body); errs.CodeOf(err) != problem.Unauthorized {
			t.Fatalf("replay: %v", err)
		}
		if got := counterValue(t, k.reg, "n8n_guard_notify_interactions_refused_total"); got != 1 {
			t.Fatalf("refused metric %v", got)
		}
	})
}

// Escalation: nobody acknowledges; each step fires once at its time, also
// across a restart; an acknowledgement stops it.
func TestEscalation(t *testing.T) {
	k := newKeysHarness(t)
	n := k.unknownKey("booking-5")
	k.clock.Advance(29 * time.Minute)
	k.pass()
	if len(k.calls("chat.postMessage")) != 1 {
		t.Fatal("escalated before the deadline")
	}
	k.restart()
	k.wireKeys(k.ks, k.ks)
	k.clock.Advance(2 * time.Minute)
	k.pass()
	k.pass()
	posts := k.calls("chat.postMessage")
	if len(posts) != 2 || posts[1].Channel != "C0BOOK" || !strings.Contains(posts[1].Blocks, "<@U0BOSS>") ||
		!strings.Contains(posts[1].Raw, ActionComplete) {
		t.Fatalf("first step (U0BOSS in the namespace's channel, with the buttons): %+v", posts)
	}
	k.clock.Advance(30 * time.Minute)
	k.pass()
	k.restart()
	k.wireKeys(k.ks, k.ks)
	k.pass()
	posts = k.calls("chat.postMessage")
	if len(posts) != 3 || posts[2].Channel != "C0INCIDENT" {
		t.Fatalf("second step (channel C0INCIDENT): %+v", posts)
	}
	k.clock.Advance(24 * time.Hour)
	k.pass()
	if len(k.calls("chat.postMessage")) != 3 {
		t.Fatal("a step fired twice")
	}
	// The boss decides from the escalation message: the key and every
	// message about it show it.
	esc := k.list(StatusDelivered)[0] // newest first: the last escalation
	if esc.Kind != KindEscalation {
		t.Fatalf("newest is %s", esc.Kind)
	}
	k.click("U0BOSS", ActionComplete, esc.ID)
	if k.key("booking-5").State != keystore.StateCompleted {
		t.Fatal("the escalation's button did not resolve the key")
	}
	if u := k.calls("chat.update"); len(u) != 3 {
		t.Fatalf("%d messages updated, want the original and both escalations", len(u))
	}
	_ = n

	t.Run("resolved from the CLI or API: no escalation, the message says who", func(t *testing.T) {
		k := newKeysHarness(t)
		k.unknownKey("booking-8")
		if _, err := k.ks.Resolve(context.Background(), keystore.ResolveRequest{Namespace: "bookings", Key: "booking-8",
			Resolution: keystore.StateFailed, By: "office manager", Note: "no mail went out"}); err != nil {
			t.Fatal(err)
		}
		k.clock.Advance(3 * time.Hour)
		k.pass()
		k.pass()
		if len(k.calls("chat.postMessage")) != 1 {
			t.Fatal("escalated a key that was resolved")
		}
		if u := k.calls("chat.update"); len(u) != 1 || !strings.Contains(u[0].Blocks, "office manager *allowed a retry*") {
			t.Fatalf("updates: %+v", u)
		}
	})
	t.Run("acknowledged in time: no escalation", func(t *testing.T) {
		k := newKeysHarness(t)
		n := k.unknownKey("booking-6")
		k.click("U0OFFICE", ActionAck, n.ID)
		k.clock.Advance(3 * time.Hour)
		k.pass()
		if len(k.calls("chat.postMessage")) != 1 {
			t.Fatal("escalated after an acknowledgement")
		}
	})
	t.Run("snoozed: the owner is reminded after an hour, then the steps go on", func(t *testing.T) {
		k := newKeysHarness(t)
		a := k.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "78"))
		k.pass()
		k.clock.Advance(10 * time.Minute)
		k.click("U0ORDERS", ActionSnooze, a.NotificationID)
		k.clock.Advance(45 * time.Minute) // past the 30 min step: snoozed
		k.pass()
		if len(k.calls("chat.postMessage")) != 1 {
			t.Fatal("escalated while snoozed")
		}
		k.clock.Advance(20 * time.Minute)
		k.pass()
		k.pass()
		posts := k.calls("chat.postMessage")
		if len(posts) != 2 || !strings.Contains(posts[1].Blocks, "<@U0ORDERS>") || !strings.Contains(posts[1].Blocks, "the snooze is over") {
			t.Fatalf("reminder: %+v", posts)
		}
		k.clock.Advance(29 * time.Minute)
		k.pass()
		if len(k.calls("chat.postMessage")) != 2 {
			t.Fatal("the step after the snooze came before its 30 min")
		}
		k.clock.Advance(time.Minute)
		k.pass()
		k.pass()
		posts = k.calls("chat.postMessage")
		if len(posts) != 3 || !strings.Contains(posts[2].Blocks, "<!subteam^S0OPS>") {
			t.Fatalf("the step after the snooze: %+v", posts)
		}
	})
}

// Two people press "It happened" at the same moment: one decides, the
// other is told, and the message names the one in the key's history.
func TestSimultaneousClicks(t *testing.T) {
	for range 5 {
		k := newKeysHarness(t)
		n := k.unknownKey("booking-20")
		var reqs [2][2]any
		for i, user := range []string{"U0OFFICE", "U0HELPER"} {
			hdr, body := signed(signingSecret, time.Now(), blockAction(user, ActionComplete, n.ID))
			reqs[i] = [2]any{hdr, body}
		}
		done := make(chan error, 2)
		for _, r := range reqs {
			go func() { done <- k.in.Interaction(context.Background(), r[0].(http.Header), r[1].([]byte)) }()
		}
		for range 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		k.waitClicks()
		k.pass()
		rec := k.key("booking-20")
		resolved := 0
		for _, h := range rec.History {
			if h.Event == keystore.HistoryResolved {
				resolved++
			}
		}
		eph := k.calls("chat.postEphemeral")
		u := k.calls("chat.update")
		winner := strings.TrimSuffix(rec.ResolvedBy[strings.Index(rec.ResolvedBy, "(Slack ")+7:], ")")
		if resolved != 1 || len(eph) != 1 || !strings.Contains(eph[0].Text, "Already resolved") ||
			len(u) != 1 || !strings.Contains(u[0].Blocks, "<@"+winner+">") {
			t.Fatalf("resolved %d times, ephemeral %+v, updates %d (winner %s)", resolved, eph, len(u), winner)
		}
	}
}

// Without a bot token a click still decides for a named person, and one
// that needs a user group to be asked is refused, not a crash.
func TestClickWithoutBotToken(t *testing.T) {
	cfg := decisionConfig()
	h := newHarness(t, nil, cfg)
	a := h.intake(failureBody("orders-sync", "POST to CRM", "HTTP 503", "1"))
	for _, user := range []string{"U0OPS1", "U0ORDERS"} { // a group member, then the owner
		hdr, body := signed(signingSecret, time.Now(), blockAction(user, ActionAck, a.NotificationID))
		if err := h.in.Interaction(context.Background(), hdr, body); err != nil {
			t.Fatal(err)
		}
		h.waitClicks()
	}
	r, err := h.svc.Outbox().Get(context.Background(), a.NotificationID)
	if err != nil || r.Decision != DecisionAcknowledged || r.DecidedBy != "U0ORDERS" {
		t.Fatalf("decision %+v %v", r, err)
	}
}

// A click is used once: the same signed request again, with its signature
// in upper case or after a restart (inside Slack's five minutes), is a
// replay and changes nothing.
func TestReplays(t *testing.T) {
	cases := []struct {
		name  string
		again func(k *keysHarness, hdr http.Header) http.Header
	}{
		{"exact replay", func(k *keysHarness, hdr http.Header) http.Header { return hdr }},
		{"signature in upper case", func(k *keysHarness, hdr http.Header) http.Header {
			up := hdr.Clone()
			up.Set("X-Slack-Signature", "v0="+strings.ToUpper(strings.TrimPrefix(hdr.Get("X-Slack-Signature"), "v0=")))
			return up
		}},
		{"after a restart", func(k *keysHarness, hdr http.Header) http.Header {
			k.restart()
			k.wireKeys(k.ks, k.ks)
			return hdr
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newKeysHarness(t)
			n := k.unknownKey("booking-30")
			hdr, body := signed(signingSecret, time.Now(), blockAction("U0OFFICE", ActionAck, n.ID))
			if err := k.in.Interaction(context.Background(), hdr, body); err != nil {
				t.Fatal(err)
			}
			k.waitClicks()
			k.pass()
			before := k.slack.Calls()
			err := k.in.Interaction(context.Background(), tc.again(k, hdr), body)
			k.waitClicks()
			k.pass()
			if errs.CodeOf(err) != problem.Unauthorized || !strings.Contains(err.Error(), "replay") {
				t.Fatalf("the replay was taken: %v", err)
			}
			if after := k.slack.Calls(); len(after) != len(before) {
				t.Fatalf("a replay made Slack calls: %+v", after[len(before):])
			}
		})
	}
}

// A late click on the message of an earlier attempt of a key changes
// nothing: the current attempt was never shown to the person.
func TestLateClickForAnOlderAttempt(t *testing.T) {
	k := newKeysHarness(t)
	first := k.unknownKey("booking-40")
	if _, err := k.ks.Resolve(context.Background(), keystore.ResolveRequest{Namespace: "bookings", Key: "booking-40",
		Resolution: keystore.StateFailed, By: "ops", Note: "no mail went out"}); err != nil {
		t.Fatal(err)
	}
	k.pass()
	k.unknownKey("booking-40") // attempt 2, unknown again
	if rec := k.key("booking-40"); rec.Attempt != 2 || rec.State != keystore.StateUnknown {
		t.Fatalf("fixture: %+v", rec)
	}
	history := len(k.key("booking-40").History)
	for _, value := range []string{first.ID + "|1|1", first.ID} { // as rendered, and a button of an earlier version
		ephemeral := len(k.calls("chat.postEphemeral"))
		if err := k.click("U0OFFICE", ActionRetry, value); err != nil {
			t.Fatal(err)
		}
		if rec := k.key("booking-40"); rec.State != keystore.StateUnknown || len(rec.History) != history {
			t.Fatalf("a click for attempt 1 changed attempt 2: %s, history %d → %d", rec.State, history, len(rec.History))
		}
		eph := k.calls("chat.postEphemeral")
		if len(eph) != ephemeral+1 || !strings.Contains(eph[len(eph)-1].Text, "out of date") ||
			!strings.Contains(eph[len(eph)-1].Text, "/ui/key?key=booking-40") {
			t.Fatalf("ephemeral answers: %+v", eph)
		}
	}
}

// A key resolved in the API, the console or the CLI updates its message
// at once (the key_resolved event), not at the next escalation step.
func TestResolvedElsewhereUpdatesTheMessageAtOnce(t *testing.T) {
	k := newKeysHarness(t)
	k.unknownKey("booking-50")
	if _, err := k.ks.Resolve(context.Background(), keystore.ResolveRequest{Namespace: "bookings", Key: "booking-50",
		Resolution: keystore.StateCompleted, By: "office manager", Note: "found it in the Sent folder"}); err != nil {
		t.Fatal(err)
	}
	k.pass() // no time passes: no escalation step is due
	k.pass()
	u := k.calls("chat.update")
	if len(u) != 1 || !strings.Contains(u[0].Blocks, "office manager marked it *completed*") || strings.Contains(u[0].Raw, "guard_") {
		t.Fatalf("the message was not updated at once: %+v", u)
	}
}
