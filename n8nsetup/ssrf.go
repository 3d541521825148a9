package n8nsetup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/n8n-guard/n8n-guard/n8n"
	"github.com/n8n-guard/n8n-guard/workflows"
)

// n8n's SSRF protection (N8N_SSRF_PROTECTION_ENABLED, off by default in
// 1.x-3.x) refuses requests of its nodes to the ranges below: localhost
// and the private networks, where the guard usually runs. n8n tells no
// API key whether it is on, so check warns on the condition, and takes a
// failed execution with n8n's refusal of the guard's address as proof.

// ssrfDefaultBlocked is n8n's default block list (SSRF_DEFAULT_BLOCKED_IP_RANGES
// in @n8n/config, read 2026-12-07) with what 3.0 adds to it: the shared
// address space and the IPv6 transition ranges.
var ssrfDefaultBlocked = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", // RFC 1918
		"127.0.0.0/8", "::1/128", // loopback
		"169.254.0.0/16", "fe80::/10", // link-local, cloud metadata
		"fc00::/7",                                                                                        // IPv6 unique local
		"0.0.0.0/8", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", // reserved
		"100.64.0.0/10", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32", // 3.0: shared space, IPv6 transition
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// blockedBy is the default range of n8n's SSRF block list that holds a,
// or "" for none.
func blockedBy(a netip.Addr) string {
	a = a.Unmap()
	for _, p := range ssrfDefaultBlocked {
		if p.Contains(a) {
			return p.String()
		}
	}
	return ""
}

// guardAddress is one address n8n calls the guard at, as the workflows'
// Config nodes hold it, with the workflows that hold it.
type guardAddress struct {
	URL, Host string
	Workflows []string // "id \"name\""
}

// guardAddresses are the guard's addresses in the workflows' Config nodes
// (the error handler's, the examples', every guarded workflow's).
func guardAddresses(all []n8n.Workflow) []guardAddress {
	var out []guardAddress
	for _, w := range all {
		if w.IsArchived {
			continue
		}
		v, ok := workflows.ConfigValue(w.Nodes, workflows.GuardURL)
		s, _ := v.(string)
		u, err := url.Parse(strings.TrimPrefix(strings.TrimSpace(s), "="))
		if !ok || err != nil || u.Hostname() == "" {
			continue
		}
		i := slices.IndexFunc(out, func(g guardAddress) bool { return g.URL == s })
		if i < 0 {
			out = append(out, guardAddress{URL: s, Host: u.Hostname()})
			i = len(out) - 1
		}
		out[i].Workflows = append(out[i].Workflows, fmt.Sprintf("%s %q", w.ID, w.Name))
	}
	return out
}

// Resolver finds a host's addresses (net.DefaultResolver's LookupNetIP).
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

func (inst *Instance) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	if strings.EqualFold(host, "localhost") {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if inst.Resolve != nil {
		return inst.Resolve(ctx, host)
	}
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// ssrfAllow is what to set on n8n so that its SSRF protection lets the
// guard's host through: its address as a range, or its name.
func ssrfAllow(host string) string {
	if a, err := netip.ParseAddr(host); err == nil {
		return "N8N_SSRF_ALLOWED_IP_RANGES=" + netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String()
	}
	return "N8N_SSRF_ALLOWED_HOSTNAMES=" + host
}

// checkSSRF warns where n8n's SSRF protection, if on, would refuse the
// guard's address, and reports as silent the workflows whose recent failed
// executions show n8n refusing it: the reserve fails and so does the
// error handler's call to the guard, so nobody hears of it.
func (n *session) checkSSRF(ctx context.Context, all []n8n.Workflow) error {
	addrs := guardAddresses(all)
	if len(addrs) == 0 {
		return nil
	}
	known := map[string]guardAddress{} // a host or an address n8n may name → its guard address
	for _, g := range addrs {
		known[strings.ToLower(g.Host)] = g
		ips, err := n.resolve(ctx, g.Host)
		if err != nil || len(ips) == 0 {
			n.rep.add(Note, "the guard's address %s (in %s) does not resolve here; n8n resolves it itself: with N8N_SSRF_PROTECTION_ENABLED=true, n8n refuses it when it resolves to localhost or a private network (allow it on n8n: %s)",
				g.URL, strings.Join(g.Workflows, ", "), ssrfAllow(g.Host))
			continue
		}
		var blocked []string
		for _, ip := range ips {
			known[ip.Unmap().String()] = g
			if r := blockedBy(ip); r != "" {
				blocked = append(blocked, fmt.Sprintf("%s in %s", ip.Unmap(), r))
			}
		}
		if len(blocked) > 0 {
			n.rep.add(Warning, "if n8n runs with N8N_SSRF_PROTECTION_ENABLED=true (off by default; n8n tells no API key whether it is on), it refuses the guard's address %s (%s), which %s call: every guarded write and the error handler's call fail; allow it on n8n with %s",
				g.URL, strings.Join(blocked, ", "), strings.Join(g.Workflows, ", "), ssrfAllow(g.Host))
		}
	}
	refusals, err := n.ssrfRefusals(ctx)
	var ne *n8n.Error
	if errors.As(err, &ne) && (ne.Status == http.StatusForbidden || ne.Status == http.StatusNotFound) {
		n.rep.add(Note, "the API key cannot read executions (scope execution:list): n8n's refusals of the guard's address in failed executions are not checked")
		return nil
	}
	if err != nil {
		return err
	}
	byID := map[string]n8n.Workflow{}
	for _, w := range all {
		byID[w.ID] = w
	}
	seen := map[string]bool{}
	for _, r := range refusals {
		g, ok := known[strings.ToLower(r.Target)]
		if !ok || seen[r.WorkflowID] {
			continue
		}
		seen[r.WorkflowID] = true
		n.rep.Silent = append(n.rep.Silent, Silent{r.WorkflowID, byID[r.WorkflowID].Name,
			fmt.Sprintf("n8n's SSRF protection refused the guard's address %s (execution %s: %q): its guarded writes fail and so does the error handler's call to the guard; allow it on n8n with %s",
				g.URL, r.ExecutionID, r.Message, ssrfAllow(g.Host))})
	}
	return nil
}

// ssrfRefusal is one failed execution in which n8n's SSRF protection
// refused a request.
type ssrfRefusal struct {
	ExecutionID, WorkflowID string
	// Target is the host or address n8n refused ("" when its message does
	// not name one); Message is n8n's text.
	Target, Message string
}

// n8n's texts for its SSRF refusals (SsrfBlockedIpError,
// SsrfBlockedHostnameError in n8n's source, 2.x and 3.x; "IP address is
// blocked" is the first wording of the IP error).
var (
	ssrfMarkers = []string{
		"SsrfBlockedIpError", "SsrfBlockedHostnameError",
		"The request was blocked because it resolves to a restricted IP address",
		"The request was blocked because the destination hostname is restricted",
		"IP address is blocked",
	}
	ssrfTargetRes = []*regexp.Regexp{
		regexp.MustCompile(`The target '([^']+)' \(([^)]+)\) is not allowed`),
		regexp.MustCompile(`The target (\S+) is not allowed`),
		regexp.MustCompile(`The hostname '([^']+)' is on the configured`),
		regexp.MustCompile(`"hostname"\s*:\s*"([^"]+)"`),
		regexp.MustCompile(`"ip"\s*:\s*"([^"]+)"`),
	}
)

// recentFailures is how many of the newest failed executions check reads
// for n8n's SSRF refusals: enough to see a refusal that fails every run,
// one page, no hammering.
const recentFailures = 20

// ssrfRefusals reads the newest failed executions with their data (GET
// /api/v1/executions?status=error&includeData=true, 1.x to 3.x; scope
// execution:list) and returns those that hold n8n's SSRF refusal.
func (inst *Instance) ssrfRefusals(ctx context.Context) ([]ssrfRefusal, error) {
	var page struct {
		Data []struct {
			ID         any             `json:"id"`
			WorkflowID any             `json:"workflowId"`
			Data       json.RawMessage `json:"data"`
		} `json:"data"`
	}
	q := url.Values{"status": {"error"}, "includeData": {"true"}, "limit": {fmt.Sprint(recentFailures)}}
	if err := inst.Client.Do(ctx, http.MethodGet, "/executions?"+q.Encode(), nil, &page); err != nil {
		return nil, err
	}
	var out []ssrfRefusal
	for _, ex := range page.Data {
		if r, ok := ssrfRefusalIn(string(ex.Data)); ok {
			r.ExecutionID, r.WorkflowID = fmt.Sprint(ex.ID), fmt.Sprint(ex.WorkflowID)
			out = append(out, r)
		}
	}
	return out, nil
}

// ssrfRefusalIn finds n8n's SSRF refusal in an execution's data, and the
// host or address it refused.
func ssrfRefusalIn(data string) (ssrfRefusal, bool) {
	i := -1
	for _, m := range ssrfMarkers {
		if j := strings.Index(data, m); j >= 0 && (i < 0 || j < i) {
			i = j
		}
	}
	if i < 0 {
		return ssrfRefusal{}, false
	}
	r := ssrfRefusal{Message: "n8n's SSRF protection refused the request"}
	for _, m := range ssrfMarkers[2:] {
		if strings.Contains(data, m) {
			r.Message = m
			break
		}
	}
	// The target named nearest the refusal: an execution may hold other
	// hosts (the node's parameters, other nodes' items).
	window := data[max(0, i-2000):min(len(data), i+2000)]
	for _, re := range ssrfTargetRes {
		if m := re.FindStringSubmatch(window); m != nil {
			r.Target = m[1]
			return r, true
		}
	}
	return r, true
}
