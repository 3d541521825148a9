package notify_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/n8n-guard/n8n-guard/notify"
)

func TestDecidersConfig(t *testing.T) {
	cases := []struct {
		name string
		cfg  func(c *Config)
		want string // "" : accepted
	}{
		{"resolvers and steps on a namespace", func(c *Config) {
			c.Namespaces = map[string]Route{"ns": {Deciders: Deciders{Resolvers: []string{"U0A", "S0B"},
				Escalation: []EscalationStep{{After: time.Minute, To: "U0C"}, {After: time.Hour, To: "C0D"}}}}}
		}, ""},
		{"a resolver given by name", func(c *Config) {
			c.Namespaces = map[string]Route{"ns": {Deciders: Deciders{Resolvers: []string{"@bob"}}}}
		}, `namespaces.ns.resolvers[0]: "@bob"`},
		{"steps out of order", func(c *Config) {
			c.Owners[0].Escalation = []EscalationStep{{After: time.Hour, To: "U0C"}, {After: 30 * time.Minute, To: "C0D"}}
		}, "owners[0].escalation[1].after"},
		{"a step to a channel name", func(c *Config) {
			c.Owners[0].Escalation = []EscalationStep{{After: time.Hour, To: "#incidents"}}
		}, "owners[0].escalation[0].to"},
		{"escalation of breaker alerts", func(c *Config) {
			c.Destinations = map[string]Route{"crm": {Deciders: Deciders{Escalation: []EscalationStep{{After: time.Hour, To: "U0C"}}}}}
		}, "destinations.crm: breaker alerts have no buttons"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig()
			tc.cfg(&c)
			_, err := c.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}
}
