package notify_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
	"github.com/n8n-guard/n8n-guard/keystore"
	"github.com/n8n-guard/n8n-guard/keystore/bolt"
	. "github.com/n8n-guard/n8n-guard/notify"
	"github.com/n8n-guard/n8n-guard/notify/decision"
)

// Approval messages (approval.go) against the fake Slack: one message per
// event to the approvers with Approve and Reject; Reject opens the form
// for the reason; four eyes; a replayed or late click changes nothing and
// says so; an unanswered request escalates; a decision made elsewhere
// updates the message.

const gatedNS = "invoices"

func newApprovalHarness(t *testing.T) *keysHarness {
	slack := slacktest.New(t)
	slack.AddGroup("S0FIN", "U0FIN1", "U0FIN2")
	cfg := testConfig()
	cfg.Namespaces = map[string]Route{gatedNS: {Channel: "C0FIN", Owner: "U0OWNER", Approvers: []string{"U0CTRL", "U0ANN", "S0FIN"},
		Deciders: Deciders{Resolvers: []string{"U0HELPER"}, Escalation: []EscalationStep{{After: 30 * time.Minute, To: "U0BOSS"}}}}}
	h := newHarness(t, slack, cfg)
	pol := keystore.Policies{Namespaces: map[string]keystore.NamespacePolicy{gatedNS: {Approval: keystore.ApprovalPolicy{Required: true, FourEyes: true}}}}
	ks, err := bolt.Open(filepath.Join(t.TempDir(), "keys.db"), bolt.Options{Clock: h.clock.Now, Policies: pol})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	h.opts.Events, h.opts.Keys = ks, ks
	h.wireKeys(ks, ks)
	return &keysHarness{harness: h, slack: slack, ks: ks}
}

func (k *keysHarness) request(key, by string) {
	k.t.Helper()
	r, err := k.ks.Reserve(context.Background(), keystore.ReserveRequest{Namespace: gatedNS, Key: key, Owner: "n8n exec 7",
		RequestedBy: by, ResumeURL: "http://n8n.local/webhook-waiting/" + key, Fingerprint: "invoice " + key})
	if err != nil || r.Outcome != keystore.OutcomeParked {
		k.t.Fatalf("reserve %s: %+v %v", key, r, err)
	}
}

var refRE = regexp.MustCompile("ref `(n_[0-9a-f]+)`")

func (k *keysHarness) approvalOf(key string) Notification {
	k.t.Helper()
	for _, p := range k.calls("chat.postMessage") {
		if m := refRE.FindStringSubmatch(p.Blocks); m != nil && strings.Contains(p.Blocks, "`"+key+"`") {
			for _, it := range k.list("") {
				if it.ID == m[1] && it.Kind == KindApproval {
					return it
				}
			}
		}
	}
	k.t.Fatalf("no approval message about %s: %+v", key, k.list(""))
	return Notification{}
}

func (k *keysHarness) gatedKey(key string) *keystore.Record {
	k.t.Helper()
	res, err := k.ks.Lookup(context.Background(), gatedNS, key)
	if err != nil || res.Record == nil {
		k.t.Fatalf("lookup %s: %v", key, err)
	}
	return res.Record
}

// submitReason sends the Reject form as Slack does (view_submission).
func (k *keysHarness) submitReason(user, meta, reason string) error {
	payload := map[string]any{
		"type": "view_submission", "trigger_id": "13345224609.738474920.8088930838d88f008e0",
		"user": map[string]any{"id": user, "username": strings.ToLower(user), "name": "name-of-" + user},
		"team": map[string]any{"id": "T0TEAM"},
		"view": map[string]any{"id": "V0REASON", "type": "modal", "callback_id": "guard_reject_reason", "private_metadata": meta,
			"state": map[string]any{"values": map[string]any{"reason": map[string]any{"reason": map[string]any{"type": "plain_text_input", "value": reason}}}}},
	}
	hdr, body := signed(signingSecret, time.Now(), payload)
	err := k.in.Interaction(context.Background(), hdr, body)
	k.waitClicks()
	k.pass()
	return err
}

func (k *keysHarness) clickWithTrigger(user, action, value string) error {
	p := blockAction(user, action, value)
	p["trigger_id"] = "13345224609.738474920.8088930838d88f008e1"
	p["channel"] = map[string]any{"id": "C0FIN"}
	hdr, body := signed(signingSecret, time.Now(), p)
	err := k.in.Interaction(context.Background(), hdr, body)
	k.waitClicks()
	k.pass()
	return err
}

func lastEphemeral(k *keysHarness) string {
	eph := k.calls("chat.postEphemeral")
	if len(eph) == 0 {
		return ""
	}
	return eph[len(eph)-1].Text
}

func TestApprovalButtons(t *testing.T) {
	k := newApprovalHarness(t)
	for _, key := range []string{"inv_1", "inv_2", "inv_3"} {
		k.request(key, "U0ANN")
	}
	k.pass()
	posts := k.calls("chat.postMessage")
	if len(posts) != 3 {
		t.Fatalf("%d messages, want one per event (3): %+v", len(posts), posts)
	}
	for _, p := range posts {
		if p.Channel != "C0FIN" || !strings.Contains(p.Blocks, "waits for your approval") || !strings.Contains(p.Raw, ActionApprove) ||
			!strings.Contains(p.Raw, ActionReject) || !strings.Contains(p.Blocks, "requested by U0ANN") {
			t.Fatalf("approval message:\n%s\n%s", p.Channel, p.Blocks)
		}
	}
	// A copy of an event awaiting approval makes no second message.
	k.request("inv_1", "U0ANN")
	k.pass()
	if n := len(k.calls("chat.postMessage")); n != 3 {
		t.Fatalf("a copy made a second request: %d messages", n)
	}

	n1 := k.approvalOf("inv_1")
	// Not an approver (the namespace's resolver is not one).
	if err := k.click("U0HELPER", ActionApprove, n1.ID); err != nil {
		t.Fatal(err)
	}
	if k.gatedKey("inv_1").Reason != keystore.ReasonAwaitingApproval || !strings.Contains(lastEphemeral(k), "Not allowed") {
		t.Fatalf("a stranger approved: %s / %q", k.gatedKey("inv_1").Reason, lastEphemeral(k))
	}
	// Four eyes: the requester, though an approver, may not approve.
	if err := k.click("U0ANN", ActionApprove, n1.ID); err != nil {
		t.Fatal(err)
	}
	if k.gatedKey("inv_1").Reason != keystore.ReasonAwaitingApproval || !strings.Contains(lastEphemeral(k), "four eyes") {
		t.Fatalf("the requester approved: %s / %q", k.gatedKey("inv_1").Reason, lastEphemeral(k))
	}
	// An approver (a member of the approvers' group) approves.
	if err := k.click("U0FIN1", ActionApprove, n1.ID); err != nil {
		t.Fatal(err)
	}
	rec := k.gatedKey("inv_1")
	last := rec.History[len(rec.History)-1]
	if rec.Reason != keystore.ReasonApproved || last.Event != keystore.HistoryApproved || !strings.Contains(last.By, "U0FIN1") {
		t.Fatalf("approve: %s, history %+v", rec.Reason, last)
	}
	updates := k.calls("chat.update")
	if len(updates) == 0 || !strings.Contains(updates[len(updates)-1].Blocks, "<@U0FIN1> *approved* it") || strings.Contains(updates[len(updates)-1].Raw, ActionApprove) {
		t.Fatalf("the message does not show the approval in place: %+v", updates)
	}
	// A late Approve by another approver: nothing changes, and it says so.
	before := k.gatedKey("inv_1")
	if err := k.click("U0CTRL", ActionApprove, n1.ID); err != nil {
		t.Fatal(err)
	}
	if after := k.gatedKey("inv_1"); !after.UpdatedAt.Equal(before.UpdatedAt) || len(after.History) != len(before.History) {
		t.Fatalf("a late approve changed the key: %+v", after)
	}
	if !strings.Contains(lastEphemeral(k), "Already") {
		t.Fatalf("a late approve was not answered: %q", lastEphemeral(k))
	}
	// The very same signed request again: refused as a replay.
	hdr, body := signed(signingSecret, time.Now(), blockAction("U0FIN2", ActionApprove, n1.ID))
	if err := k.in.Interaction(context.Background(), hdr, body); err != nil {
		t.Fatal(err)
	}
	if err := k.in.Interaction(context.Background(), hdr, body); err == nil {
		t.Fatal("a replayed request was accepted")
	}
	k.waitClicks()

	// Reject: the button opens the form; nothing is decided until it is sent.
	n2 := k.approvalOf("inv_2")
	if err := k.clickWithTrigger("U0CTRL", ActionReject, n2.ID); err != nil {
		t.Fatal(err)
	}
	views := k.calls("views.open")
	if len(views) != 1 || !strings.Contains(views[0].Raw, "guard_reject_reason") {
		t.Fatalf("views.open calls: %+v", views)
	}
	if k.gatedKey("inv_2").Reason != keystore.ReasonAwaitingApproval {
		t.Fatal("the Reject button decided before the reason was given")
	}
	meta, _ := json.Marshal(decision.ReasonForm{Value: n2.ID, Channel: "C0FIN"})
	if err := k.submitReason("U0CTRL", string(meta), "  "); err != nil {
		t.Fatal(err)
	}
	if k.gatedKey("inv_2").Reason != keystore.ReasonAwaitingApproval || !strings.Contains(lastEphemeral(k), "needs its reason") {
		t.Fatalf("a blank reason rejected: %q", lastEphemeral(k))
	}
	if err := k.submitReason("U0CTRL", string(meta), "duplicate of INV-1041"); err != nil {
		t.Fatal(err)
	}
	rej := k.gatedKey("inv_2")
	if rej.Reason != keystore.ReasonApprovalRejected || rej.Message != "duplicate of INV-1041" || rej.Retryable ||
		rej.History[len(rej.History)-1].Event != keystore.HistoryApprovalRejected {
		t.Fatalf("reject: %+v", rej)
	}
	updates = k.calls("chat.update")
	if !strings.Contains(updates[len(updates)-1].Blocks, "<@U0CTRL> *rejected* it") {
		t.Fatalf("the message does not show the rejection: %s", updates[len(updates)-1].Blocks)
	}

	// Unanswered: it escalates like any message of the namespace.
	k.clock.Advance(31 * time.Minute)
	k.pass()
	k.pass()
	var esc *slacktest.Call
	for _, p := range k.calls("chat.postMessage") {
		if strings.Contains(p.Blocks, "Escalated") && strings.Contains(p.Blocks, "inv_3") {
			esc = &p
		}
	}
	if esc == nil || !strings.Contains(esc.Blocks, "waits for approval") || !strings.Contains(esc.Raw, ActionApprove) {
		t.Fatalf("no escalation of the unanswered request: %+v", k.calls("chat.postMessage"))
	}
	// Decided elsewhere (the API, the console): the messages show it.
	if _, err := k.ks.Approve(context.Background(), keystore.ApprovalRequest{Namespace: gatedNS, Key: "inv_3", By: "controller in the console"}); err != nil {
		t.Fatal(err)
	}
	k.pass()
	k.pass()
	shown := 0
	for _, u := range k.calls("chat.update") {
		if strings.Contains(u.Blocks, "controller in the console *approved* it") {
			shown++
		}
	}
	if shown < 2 {
		t.Fatalf("the request and its escalation do not both show the approval made elsewhere (%d updates show it)", shown)
	}
}

// Four eyes in Slack knows the clicking user by name too: a request
// recorded under the Slack user's name, however spelled, is theirs.
// Mutation tried: the Slack user's name left out of the identities
// (approval.go): U0ANN approves her own request in one click.
func TestApprovalFourEyesKnowsTheSlackUsersName(t *testing.T) {
	k := newApprovalHarness(t)
	k.request("inv_1", " NAME-OF-U0ANN\u00a0")
	k.pass()
	n1 := k.approvalOf("inv_1")
	if err := k.click("U0ANN", ActionApprove, n1.ID); err != nil {
		t.Fatal(err)
	}
	if k.gatedKey("inv_1").Reason != keystore.ReasonAwaitingApproval || !strings.Contains(lastEphemeral(k), "four eyes") {
		t.Fatalf("the requester approved by her Slack name: %s / %q", k.gatedKey("inv_1").Reason, lastEphemeral(k))
	}
	if err := k.click("U0CTRL", ActionApprove, n1.ID); err != nil {
		t.Fatal(err)
	}
	if k.gatedKey("inv_1").Reason != keystore.ReasonApproved {
		t.Fatalf("another approver: %s / %q", k.gatedKey("inv_1").Reason, lastEphemeral(k))
	}
}

// The approval request shows the event's summary beside who asked for
// it, escaped as mrkdwn (a summary cannot mention, link or format); a
// request without a summary shows nothing more than before. Its
// escalation names the summary too.
func TestApprovalMessageShowsTheSummaryWithTheRequester(t *testing.T) {
	k := newApprovalHarness(t)
	reserve := func(key, summary, dest string) {
		t.Helper()
		r, err := k.ks.Reserve(context.Background(), keystore.ReserveRequest{Namespace: gatedNS, Key: key, Owner: "n8n exec 7",
			RequestedBy: "U0ANN", ResumeURL: "http://n8n.local/webhook-waiting/" + key, Fingerprint: "invoice " + key, Summary: summary, Destination: dest})
		if err != nil || r.Outcome != keystore.OutcomeParked {
			t.Fatalf("reserve %s: %+v %v", key, r, err)
		}
	}
	reserve("inv_4711", "Invoice 4711 · 12,000 EUR · <!channel> & <https://evil.example|ACME>", "billing")
	reserve("inv_4712", "", "")
	k.pass()
	posts := map[string]slacktest.Call{}
	for _, p := range k.calls("chat.postMessage") {
		for _, key := range []string{"inv_4711", "inv_4712"} {
			if strings.Contains(p.Blocks, "`"+key+"`") {
				posts[key] = p
			}
		}
	}
	type field struct{ Text string }
	fieldsOf := func(p slacktest.Call) []string {
		var blocks []struct {
			Type   string
			Fields []field
		}
		if err := json.Unmarshal([]byte(p.Blocks), &blocks); err != nil {
			t.Fatalf("blocks: %v\n%s", err, p.Blocks)
		}
		var out []string
		for _, b := range blocks {
			for _, f := range b.Fields {
				out = append(out, f.Text)
			}
		}
		return out
	}
	with := fieldsOf(posts["inv_4711"])
	// With the requester: where the write goes and who may approve (the
	// namespace's approvers, as Slack mentions).
	approvers := "*Approvers*\n<@U0CTRL>, <@U0ANN>, <!subteam^S0FIN>"
	want := []string{"*Summary*\nInvoice 4711 · 12,000 EUR · &lt;!channel&gt; &amp; &lt;https://evil.example|ACME&gt;", "*Requested by*\nU0ANN", "*Writes to*\n`billing`", approvers}
	if strings.Join(with, "|") != strings.Join(want, "|") {
		t.Fatalf("fields of the request with a summary:\n%q\nwant\n%q", with, want)
	}
	if !strings.Contains(posts["inv_4711"].Text, "(Invoice 4711 · 12,000 EUR · &lt;!channel&gt;") {
		t.Fatalf("the notification text lacks the summary: %q", posts["inv_4711"].Text)
	}
	if without := fieldsOf(posts["inv_4712"]); strings.Join(without, "|") != "*Requested by*\nU0ANN|"+approvers || strings.Contains(posts["inv_4712"].Blocks, "Summary") {
		t.Fatalf("a request without a summary shows %q:\n%s", without, posts["inv_4712"].Blocks)
	}

	k.clock.Advance(31 * time.Minute)
	k.pass()
	k.pass()
	for _, p := range k.calls("chat.postMessage") {
		if strings.Contains(p.Blocks, "Escalated") && strings.Contains(p.Blocks, "inv_4711") {
			if !strings.Contains(p.Blocks, "(Invoice 4711 · 12,000 EUR · &lt;!channel&gt;") {
				t.Fatalf("the escalation lacks the summary:\n%s", p.Blocks)
			}
			return
		}
	}
	t.Fatalf("no escalation of the request: %+v", k.calls("chat.postMessage"))
}

// Slack's approval request shows who asked, an e-mail address as it is:
// the payload's redaction of addresses ("[email]") is not for the
// requester, whom the approver must see. Mutation: the requester cleaned
// with the redaction (approval.go) shows "[email]".
func TestApprovalMessageShowsTheRequestersAddress(t *testing.T) {
	k := newApprovalHarness(t)
	k.request("inv_9", "Ana Lopez <ana@example.com>")
	k.pass()
	var post string
	for _, p := range k.calls("chat.postMessage") {
		if strings.Contains(p.Blocks, "`inv_9`") {
			post = p.Blocks
		}
	}
	if !strings.Contains(post, "requested by Ana Lopez &lt;ana@example.com&gt;") || strings.Contains(post, "[email]") {
		t.Fatalf("the request does not show the requester's address:\n%s", post)
	}
}
