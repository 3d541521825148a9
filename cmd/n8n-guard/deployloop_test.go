package main

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// y walks decoded YAML: y(doc, "spec", "template") or "" when absent.
func y(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func ys(v any, keys ...string) string { s, _ := y(v, keys...).(string); return s }

func yl(v any, keys ...string) []any { l, _ := y(v, keys...).([]any); return l }

// composeDefault resolves ${VAR:-default} and ${VAR:?msg} as compose does
// with VAR unset: the default, or "" (the user must set it).
var composeVar = regexp.MustCompile(`\$\{([A-Z0-9_]+)(?::?[-?]([^}]*))?\}`)

func composeDefault(s string) string {
	return composeVar.ReplaceAllStringFunc(s, func(m string) string {
		sub := composeVar.FindStringSubmatch(m)
		if strings.Contains(m, ":-") {
			return sub[2]
		}
		return ""
	})
}

func originOf(t *testing.T, where, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Errorf("%s: %q is not an absolute URL", where, raw)
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// The compose file and the Kubernetes manifests run the whole loop as
// shipped: n8n's webhook URL is set and the guard's resume origin is its
// origin (resume URLs reach n8n, and the guard accepts them); the guard's
// configuration is mounted where N8N_GUARD_CONFIG says and loads; Slack's
// signing secret / app token and n8n's API come from .env / the Secret;
// the shared secrets (tokens, resume secret) come from there too; and the
// `n8n setup` step exists, aims at the guard and can read the resume
// secret. Kubernetes' ConfigMap holds the compose example's text.
func TestDeployFilesRunTheWholeLoop(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy")
	example, err := os.ReadFile(filepath.Join(dir, "compose", "n8n-guard.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(filepath.Join(dir, "compose", "n8n-guard.yaml")); err != nil {
		t.Fatalf("the example configuration does not load: %v", err)
	}
	fc := map[string]any{}
	if err := yaml.Unmarshal(example, &fc); err != nil {
		t.Fatal(err)
	}
	if ys(fc, "notify", "default_channel") == "" || len(yl(fc, "owners")) == 0 || len(y(fc, "destinations").(map[string]any)) == 0 {
		t.Errorf("the example configuration lacks a default channel, an owner rule or a destination")
	}
	approval := false
	for _, ns := range y(fc, "namespaces").(map[string]any) {
		approval = approval || ys(ns, "approval") == "required"
	}
	if !approval {
		t.Errorf("the example configuration has no approval namespace")
	}
	shared := []string{"SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "N8N_API_URL", "N8N_API_KEY"}
	// The guard's shared secrets: n8n's credentials "n8n-guard resume" and
	// "n8n-guard check" hold them, so the guards and the setup that creates
	// those credentials read them from the same place.
	secrets := []string{"N8N_GUARD_RESUME_SECRET", "N8N_GUARD_CHECK_SECRET"}

	t.Run("compose", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(dir, "compose", "compose.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		envExample, err := os.ReadFile(filepath.Join(dir, "compose", ".env.example"))
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := yaml.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		env := func(svc string) map[string]string {
			out := map[string]string{}
			for k, v := range y(c, "services", svc, "environment").(map[string]any) {
				s, _ := v.(string)
				out[k] = s
			}
			return out
		}
		n8nEnv, guardEnv := env("n8n"), env("n8n-guard")
		webhook := composeDefault(n8nEnv["WEBHOOK_URL"])
		if webhook == "" {
			t.Fatalf("n8n has no WEBHOOK_URL: its resume URLs would point at localhost, the guard's own container")
		}
		// n8n's resume URLs (public) are accepted and called at n8n's
		// service on the compose network, as serve's own settings say.
		guardConfig := Config{N8nWebhookURL: composeDefault(guardEnv["N8N_WEBHOOK_URL"]), N8nURL: composeDefault(guardEnv["N8N_URL"]),
			N8nAPIURL: composeDefault(guardEnv["N8N_API_URL"]), ResumeOrigins: splitTokens(composeDefault(guardEnv["N8N_GUARD_RESUME_ORIGINS"]))}
		wantResumeCallsAt(t, "compose", guardConfig, webhook, "http://n8n:5678")
		for _, e := range append(slices.Clone(shared), secrets...) {
			v, ok := guardEnv[e]
			if !ok {
				t.Errorf("the guard is not given %s", e)
			}
			if m := composeVar.FindStringSubmatch(v); m != nil && !strings.Contains(string(envExample), m[1]+"=") {
				t.Errorf("%s comes from .env's %s, which .env.example does not name", e, m[1])
			}
		}
		if !strings.HasPrefix(guardEnv["N8N_GUARD_TOKENS"], "${") {
			t.Errorf("the guard's tokens are not from .env")
		}
		cfgPath := guardEnv["N8N_GUARD_CONFIG"]
		mounted := false
		for _, v := range yl(c, "services", "n8n-guard", "volumes") {
			src, dst, _ := strings.Cut(strings.TrimSuffix(v.(string), ":ro"), ":")
			if dst == cfgPath && strings.HasPrefix(src, "./") {
				b, err := os.ReadFile(filepath.Join(dir, "compose", src))
				mounted = err == nil && bytes.Equal(b, example)
			}
		}
		if cfgPath == "" || !mounted {
			t.Errorf("the guard's configuration (N8N_GUARD_CONFIG %q) is not mounted from deploy/compose/n8n-guard.yaml", cfgPath)
		}
		for _, svc := range []string{"n8n-guard", "n8n-guard-setup"} {
			if y(c, "services", svc, "ulimits", "nofile") == nil || y(c, "services", svc, "ulimits", "nproc") == nil {
				t.Errorf("%s has no ulimits nofile and nproc: runc (podman) refuses the engine's default rlimits on some hosts", svc)
			}
		}
		// Compose interpolates the whole file, profiles or not: a required
		// variable stops every command. Only the token exists before n8n does.
		for _, m := range regexp.MustCompile(`\$\{([A-Z0-9_]+):\?`).FindAllStringSubmatch(string(raw), -1) {
			if m[1] != "N8N_GUARD_TOKEN" {
				t.Errorf("${%s:?...}: the first `docker compose up -d n8n n8n-guard` fails until %s is set, which needs n8n running", m[1], m[1])
			}
		}

		setup := y(c, "services", "n8n-guard-setup")
		var args []string
		for _, a := range yl(setup, "command") {
			args = append(args, a.(string))
		}
		checkSetup(t, "compose n8n-guard-setup", args, "n8n-guard")
		senv := env("n8n-guard-setup")
		if senv["N8N_API_KEY"] == "" || senv["N8N_GUARD_TOKEN"] == "" {
			t.Errorf("the setup service lacks N8N_API_KEY or the guard's token")
		}
		for _, e := range secrets {
			if senv[e] != guardEnv[e] {
				t.Errorf("the setup service's %s is %q, the guard's %q: the credential it creates would not hold the guard's secret", e, senv[e], guardEnv[e])
			}
		}
		readsData := slices.ContainsFunc(yl(setup, "volumes"), func(v any) bool { return strings.HasPrefix(v.(string), "guard-data:/data") })
		if !readsData || senv["N8N_GUARD_STORE"] == "" {
			t.Errorf("the setup service cannot find the resume secret: mount guard-data at /data (bbolt) and pass N8N_GUARD_STORE (PostgreSQL)")
		}

		// Queue mode: main + worker + Redis, as a profile.
		worker := y(c, "services", "n8n-worker")
		if !slices.Contains(yl(worker, "profiles"), any("queue")) || !slices.Contains(yl(worker, "command"), any("worker")) ||
			!slices.Contains(yl(c, "services", "redis", "profiles"), any("queue")) {
			t.Errorf("no queue profile with an n8n worker and Redis")
		}
		if composeDefault(env("n8n-worker")["WEBHOOK_URL"]) != webhook || env("n8n-worker")["EXECUTIONS_MODE"] == "" {
			t.Errorf("the worker does not share n8n's environment (WEBHOOK_URL, EXECUTIONS_MODE)")
		}
	})

	t.Run("kubernetes", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(dir, "kubernetes", "*.yaml"))
		var docs []any
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dec := yaml.NewDecoder(bytes.NewReader(raw))
			for {
				var d any
				if err := dec.Decode(&d); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				docs = append(docs, d)
			}
		}
		byKind := map[string][]any{}
		for _, d := range docs {
			byKind[ys(d, "kind")] = append(byKind[ys(d, "kind")], d)
		}
		services := map[string]any{}
		for _, s := range byKind["Service"] {
			services[ys(s, "metadata", "name")] = s
		}
		configMaps := map[string]any{}
		for _, cm := range byKind["ConfigMap"] {
			configMaps[ys(cm, "metadata", "name")] = cm
		}
		type envVar struct{ value, secretKey string }
		envOf := func(c any) map[string]envVar {
			out := map[string]envVar{}
			for _, e := range yl(c, "env") {
				out[ys(e, "name")] = envVar{ys(e, "value"), ys(e, "valueFrom", "secretKeyRef", "key")}
			}
			return out
		}
		workloads := append(byKind["StatefulSet"], byKind["Deployment"]...)
		if len(workloads) != 2 {
			t.Fatalf("want the StatefulSet and the Deployment, got %d", len(workloads))
		}
		for _, w := range workloads {
			where := ys(w, "kind") + " " + ys(w, "metadata", "name")
			pod := y(w, "spec", "template", "spec")
			c := yl(pod, "containers")[0]
			env := envOf(c)
			// n8n is not in these files: its WEBHOOK_URL is the guard's
			// N8N_WEBHOOK_URL, called at n8n's Service.
			guardConfig := Config{N8nWebhookURL: env["N8N_WEBHOOK_URL"].value, N8nURL: env["N8N_URL"].value,
				N8nAPIURL: env["N8N_API_URL"].value, ResumeOrigins: splitTokens(env["N8N_GUARD_RESUME_ORIGINS"].value)}
			if guardConfig.N8nWebhookURL == "" {
				t.Errorf("%s: no N8N_WEBHOOK_URL: n8n's public WEBHOOK_URL must be named", where)
			} else {
				wantResumeCallsAt(t, where, guardConfig, guardConfig.N8nWebhookURL, "http://n8n.n8n.svc:5678")
			}
			for _, e := range append(append([]string{"N8N_GUARD_TOKENS"}, secrets...), shared...) {
				if env[e] == (envVar{}) {
					t.Errorf("%s: %s is not given", where, e)
				}
			}
			for _, e := range append([]string{"N8N_GUARD_TOKENS", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "N8N_API_KEY"}, secrets...) {
				if env[e].secretKey != e {
					t.Errorf("%s: %s does not come from the Secret", where, e)
				}
			}
			// The config file: N8N_GUARD_CONFIG names a file in a mounted ConfigMap
			// holding the example's text.
			cfg := env["N8N_GUARD_CONFIG"].value
			found := false
			for _, m := range yl(c, "volumeMounts") {
				if ys(m, "mountPath") != path.Dir(cfg) {
					continue
				}
				for _, v := range yl(pod, "volumes") {
					if ys(v, "name") == ys(m, "name") {
						cm := configMaps[ys(v, "configMap", "name")]
						found = cm != nil && ys(cm, "data", path.Base(cfg)) == string(example)
					}
				}
			}
			if cfg == "" || !found {
				t.Errorf("%s: the configuration (N8N_GUARD_CONFIG %q) is not mounted from a ConfigMap holding deploy/compose/n8n-guard.yaml", where, cfg)
			}
			if ys(w, "kind") == "StatefulSet" {
				svc := services[ys(w, "spec", "serviceName")]
				if svc == nil || ys(svc, "spec", "clusterIP") != "None" {
					t.Errorf("%s: serviceName %q is not a headless Service", where, ys(w, "spec", "serviceName"))
				}
			}
		}
		if len(byKind["Job"]) != 1 {
			t.Fatalf("no n8n setup Job")
		}
		job := byKind["Job"][0]
		c := yl(job, "spec", "template", "spec", "containers")[0]
		var args []string
		for _, a := range yl(c, "args") {
			args = append(args, a.(string))
		}
		checkSetup(t, "the setup Job", args, "n8n-guard")
		env := envOf(c)
		known := knownEnv()
		for name := range env {
			if !known[name] {
				t.Errorf("the setup Job: n8n-guard reads no variable %s", name)
			}
		}
		for _, e := range append([]string{"N8N_API_KEY", "N8N_GUARD_TOKENS", "N8N_GUARD_STORE"}, secrets...) {
			if env[e].secretKey != e {
				t.Errorf("the setup Job: %s does not come from the Secret", e)
			}
		}
		// The setup Job's /data is empty: with bbolt it finds the shared
		// secrets only in the Secret, which therefore holds them.
		if len(byKind["Secret"]) != 1 {
			t.Fatalf("want the Secret n8n-guard, got %d", len(byKind["Secret"]))
		}
		for _, e := range secrets {
			if ys(byKind["Secret"][0], "stringData", e) == "" {
				t.Errorf("the Secret has no %s: the bbolt guard keeps its own in its volume and the setup Job cannot create n8n's credential from it", e)
			}
		}
		if _, ok := services["n8n-guard"]; !ok {
			t.Errorf("no Service n8n-guard for the setup Job's --guard-url")
		}

		// The PodMonitor scrapes the workloads' pods on their http port.
		raw, err := os.ReadFile(filepath.Join(dir, "monitoring", "podmonitor.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var pm any
		if err := yaml.Unmarshal(raw, &pm); err != nil {
			t.Fatal(err)
		}
		for _, w := range workloads {
			for k, v := range y(pm, "spec", "selector", "matchLabels").(map[string]any) {
				if ys(w, "spec", "template", "metadata", "labels", k) != v {
					t.Errorf("the PodMonitor's selector %s=%v misses %s's pods", k, v, ys(w, "metadata", "name"))
				}
			}
		}
		if ys(yl(pm, "spec", "podMetricsEndpoints")[0], "port") != "http" {
			t.Errorf("the PodMonitor does not scrape the port http")
		}
	})
}

// checkSetup fails unless args are `n8n setup --create-credential` with a
// --guard-url on the guard's service name.
func checkSetup(t *testing.T, where string, args []string, guardHost string) {
	t.Helper()
	checkArgs(t, where, args)
	if len(args) < 2 || args[0] != "n8n" || args[1] != "setup" || !slices.Contains(args, "--create-credential") {
		t.Errorf("%s: %v is not `n8n setup --create-credential`", where, args)
		return
	}
	i := slices.Index(args, "--guard-url")
	if i < 0 || i+1 >= len(args) {
		t.Errorf("%s: no --guard-url", where)
		return
	}
	u, err := url.Parse(args[i+1])
	if err != nil || !strings.HasPrefix(u.Hostname(), guardHost) {
		t.Errorf("%s: --guard-url %s is not the guard's service", where, args[i+1])
	}
}

// dockerIgnored tells whether .dockerignore's patterns leave rel (a
// slash-separated path in the build context) out: a pattern matches the
// path or one of its parent folders, from the root, or anywhere after **/.
func dockerIgnored(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		p = strings.TrimPrefix(p, "/")
		anywhere := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(p, "**/")
		for i := range parts {
			if i > 0 && !anywhere {
				break
			}
			for j := i + 1; j <= len(parts); j++ {
				if ok, _ := path.Match(p, strings.Join(parts[i:j], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// The repository as a build context (Dockerfile.multistage, compose's
// build:) leaves out local state and secrets, and keeps the sources.
func TestDockerIgnoreKeepsSecretsOutOfTheBuildContext(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			patterns = append(patterns, l)
		}
	}
	for _, p := range []string{"n8n-guard-data/api-token", "n8n-guard-data/n8n-guard.db", "somewhere/n8n-guard-data/resume-secret",
		"deploy/compose/.env", "data/console-session-key", ".git/config", "dist/n8n-guard_1.0.0_linux_amd64.tar.gz", "n8n-nodes/node_modules/x/index.js"} {
		if !dockerIgnored(patterns, p) {
			t.Errorf("%s goes into the build context", p)
		}
	}
	for _, p := range []string{"go.mod", "go.sum", "cmd/n8n-guard/main.go", "keystore/postgres/migrations/0001_keystore.sql", "api/console/static/console.css", "deploy/compose/.env.example"} {
		if dockerIgnored(patterns, p) {
			t.Errorf("%s, which the build needs, is left out of the build context", p)
		}
	}
}

// A release archive holds what the archived README links (docs, the
// importable workflows) and the monitoring pack, at the repository's paths.
func TestReleaseArchivesCarryWhatTheReadmeLinks(t *testing.T) {
	repo := filepath.Join("..", "..")
	out, err := exec.Command("bash", filepath.Join(repo, "deploy", "release.sh"), "--list").Output()
	if err != nil {
		t.Fatalf("release.sh --list: %v", err)
	}
	listed := map[string]bool{}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		listed[f] = true
		if _, err := os.Stat(filepath.Join(repo, f)); err != nil && !strings.HasSuffix(f, "(linux)") {
			t.Errorf("release.sh lists %s, which does not exist", f)
		}
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\]\(([^)#:]+)[)#]`).FindAllStringSubmatch(string(readme), -1)
	for _, l := range links {
		target := l[1]
		if target == "n8n-nodes/" { // the community node: published to npm, not in the archive
			continue
		}
		if strings.HasSuffix(target, "/") {
			inside := false
			for f := range listed {
				inside = inside || strings.HasPrefix(f, target)
			}
			if !inside {
				t.Errorf("README links %s, and the archive holds nothing of it", target)
			}
			continue
		}
		if !listed[target] {
			t.Errorf("README links %s, which the archive lacks", target)
		}
	}
	for _, f := range []string{"deploy/monitoring/alerts.yml", "deploy/monitoring/grafana-dashboard.json", "deploy/monitoring/podmonitor.yaml"} {
		if !listed[f] {
			t.Errorf("the archive lacks the monitoring pack's %s", f)
		}
	}
}

// The systemd unit can serve the HTTPS recipe (bind 443 and 80 under
// DynamicUser) and read its configuration: the folder the header installs
// and ConfigurationDirectory= are open to the dynamic user, and ExecStart
// is a command of the binary.
func TestSystemdUnitServesHTTPSAndReadsItsConfig(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "systemd", "n8n-guard.service"))
	if err != nil {
		t.Fatal(err)
	}
	set := map[string][]string{}
	for _, l := range strings.Split(string(raw), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			set[k] = append(set[k], v)
		}
	}
	has := func(k, want string) bool {
		return slices.ContainsFunc(set[k], func(v string) bool { return slices.Contains(strings.Fields(v), want) })
	}
	if !has("AmbientCapabilities", "CAP_NET_BIND_SERVICE") || !has("CapabilityBoundingSet", "CAP_NET_BIND_SERVICE") {
		t.Errorf("the unit cannot bind 443/80: AmbientCapabilities and CapabilityBoundingSet need CAP_NET_BIND_SERVICE")
	}
	if slices.Contains(set["PrivateUsers"], "yes") {
		t.Errorf("PrivateUsers=yes: the capability would not count for the host's ports")
	}
	if !slices.Contains(set["DynamicUser"], "yes") || !slices.Contains(set["ConfigurationDirectory"], "n8n-guard") {
		t.Errorf("want DynamicUser=yes and ConfigurationDirectory=n8n-guard")
	}
	for _, mode := range set["ConfigurationDirectoryMode"] {
		if m, _ := strconv.ParseUint(mode, 8, 32); m&0o005 != 0o005 {
			t.Errorf("ConfigurationDirectoryMode=%s: the dynamic user cannot read the configuration", mode)
		}
	}
	if m := regexp.MustCompile(`install -d -m (\d+) /etc/n8n-guard`).FindStringSubmatch(string(raw)); m == nil {
		t.Errorf("the header does not install /etc/n8n-guard")
	} else if mode, _ := strconv.ParseUint(m[1], 8, 32); mode&0o005 != 0o005 {
		t.Errorf("the header installs /etc/n8n-guard %s: the dynamic user cannot read n8n-guard.yaml in it", m[1])
	}
	for _, cmd := range set["ExecStart"] {
		args := strings.Fields(strings.ReplaceAll(cmd, "${STATE_DIRECTORY}", "/var/lib/n8n-guard"))
		checkArgs(t, "ExecStart", args[1:])
	}
}

// Every documented `docker run` / `podman run` of the image sets nofile
// and nproc: runc (podman here, some Docker hosts) refuses to start a
// container with the engine's default rlimits.
func TestDocumentedContainerCommandsSetRlimits(t *testing.T) {
	repo := filepath.Join("..", "..")
	runs := 0
	for _, f := range []string{"README.md", "docs/deploy.md", "deploy/container/Dockerfile", "deploy/container/build.sh"} {
		raw, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(raw), "\\\n", " ") // continuation lines
		for _, line := range strings.Split(text, "\n") {
			if !regexp.MustCompile(`\b(docker|podman) run\b`).MatchString(line) || !strings.Contains(line, "n8n-guard") {
				continue
			}
			runs++
			if !strings.Contains(line, "--ulimit nofile=") || !strings.Contains(line, "--ulimit nproc=") {
				t.Errorf("%s: %q sets no --ulimit nofile= and nproc=", f, strings.TrimSpace(line))
			}
		}
	}
	if runs == 0 {
		t.Fatal("no documented container command found")
	}
}

// Wherever a deploy file gives the resume secret it gives the check secret
// the same way (optional where the resume secret is): each is the value of
// an n8n credential that setup creates and the guards must agree with.
func TestDeployFilesGiveTheCheckSecretWhereverTheResumeSecret(t *testing.T) {
	dir := filepath.Join("..", "..", "deploy")
	for _, f := range []string{
		"kubernetes/secret.yaml", "kubernetes/setup-job.yaml", "kubernetes/bbolt-statefulset.yaml",
		"kubernetes/postgres-deployment.yaml", "compose/compose.yaml", "compose/.env.example",
	} {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		s := string(raw)
		r, c := strings.Count(s, "N8N_GUARD_RESUME_SECRET"), strings.Count(s, "N8N_GUARD_CHECK_SECRET")
		if r == 0 || c != r {
			t.Errorf("%s: N8N_GUARD_RESUME_SECRET %d times, N8N_GUARD_CHECK_SECRET %d times; want both, as often", f, r, c)
		}
		optional := regexp.MustCompile(`key: (N8N_GUARD_(?:RESUME|CHECK)_SECRET), optional: true`)
		n := map[string]int{}
		for _, m := range optional.FindAllStringSubmatch(s, -1) {
			n[m[1]]++
		}
		if n["N8N_GUARD_RESUME_SECRET"] != n["N8N_GUARD_CHECK_SECRET"] {
			t.Errorf("%s: optional resume secret %d times, optional check secret %d times", f, n["N8N_GUARD_RESUME_SECRET"], n["N8N_GUARD_CHECK_SECRET"])
		}
	}
}

// wantResumeCallsAt checks that the guard configured as c accepts n8n's
// resume URLs (webhook: n8n's WEBHOOK_URL) and calls them at private, the
// address of n8n inside the deployment, with the same path.
func wantResumeCallsAt(t *testing.T, where string, c Config, webhook, private string) {
	t.Helper()
	tg, err := c.resumeTargets()
	if err != nil {
		t.Errorf("%s: the guard would not start: %v", where, err)
		return
	}
	raw := strings.TrimSuffix(webhook, "/") + "/webhook-waiting/12"
	if call, why := tg.Call(raw); why != "" {
		t.Errorf("%s: n8n's resume URL %s is refused: it %s", where, raw, why)
	} else if want := private + "/webhook-waiting/12"; call != want {
		t.Errorf("%s: n8n's resume URL %s is called at %s, want %s (n8n inside the deployment)", where, raw, call, want)
	}
}
