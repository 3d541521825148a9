package notify_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/n8n-guard/n8n-guard/internal/slacktest"
)

// n8n's HTTP errors share one message per status class; failures with a
// different status or description are different problems.
func TestGroupingKeepsDifferentCausesApart(t *testing.T) {
	h := newHarness(t, nil, testConfig())
	mk := func(code, desc, id string) string {
		return `{"execution":{"id":"` + id + `","error":{"name":"NodeApiError","httpCode":"` + code + `","message":"The service was not able to process your request","description":"` + desc + `"},"lastNodeExecuted":"POST to CRM"},"workflow":{"id":"W1","name":"orders-main"}}`
	}
	a := h.intake(mk("500", "duplicate contact: unique constraint violated", "1"))
	b := h.intake(mk("503", "database is down for maintenance", "2"))
	if b.Status == "grouped" {
		t.Fatalf("different HTTP code and description merged into one group %s", a.Group)
	}
	c := h.intake(mk("503", "database is down for maintenance", "3"))
	if c.Status != "grouped" || c.Group != b.Group {
		t.Fatalf("the same cause again must join its group: %+v after %+v", c, b)
	}
}

// A group whose first message went dead (the bot was not in the channel)
// must not swallow the failures that follow once the channel is fixed.
func TestDeadHeadStartsANewGroup(t *testing.T) {
	sl := slacktest.New(t)
	h := newHarness(t, sl, testConfig())
	sl.SetMode("not_in_channel")
	h.intake(failureBody("orders-main", "POST", "boom 1", "1"))
	h.pass()
	sl.SetMode("ok") // the operator invites the app
	h.clock.Advance(time.Minute)
	for i := 2; i < 50; i++ {
		h.intake(failureBody("orders-main", "POST", "boom 1", strconv.Itoa(i)))
	}
	for i := 0; i < 5; i++ {
		h.clock.Advance(3 * time.Minute)
		h.pass()
	}
	if n := len(sl.Delivered("chat.postMessage")); n != 1 {
		t.Fatalf("failures after the channel was fixed: %d posts, want 1 (a new group)", n)
	}
}
