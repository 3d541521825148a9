package main

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/n8n-guard/n8n-guard/workflows"
)

// Compose ships n8n 3.x with its binary data (.n8n/storage) on n8n's
// volume, the guard's address on n8n's SSRF allow-list, and a 2.x variant:
// an override file, decoded strictly, that changes the n8n images' tag
// and nothing else.
func TestComposeShipsN8n3AndA2xVariant(t *testing.T) {
	const image, home = "docker.n8n.io/n8nio/n8n", "/home/node/.n8n"
	dir := filepath.Join("..", "..", "deploy", "compose")
	raw, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Services map[string]struct {
			Image       string
			Volumes     []string
			Environment map[string]string
		}
		Volumes map[string]any
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	n8ns := []string{}
	for name, s := range c.Services {
		if !strings.HasPrefix(s.Image, image+":") {
			continue
		}
		n8ns = append(n8ns, name)
		if !strings.HasPrefix(s.Image, image+":3.") {
			t.Errorf("%s: image %q, want n8n 3.x", name, s.Image)
		}
		onVolume := false
		for _, v := range s.Volumes {
			src, dst, _ := strings.Cut(v, ":")
			dst, _, _ = strings.Cut(dst, ":")
			switch dst = strings.TrimRight(dst, "/"); dst {
			case home + "/binaryData", home + "/storage":
				t.Errorf("%s: a volume at %s alone: mount all of %s (3.x renames binaryData to storage inside it)", name, dst, home)
			case home:
				_, onVolume = c.Volumes[src]
			}
		}
		if !onVolume {
			t.Errorf("%s: no named volume holds %s/storage", name, home)
		}
		if !strings.Contains(s.Environment["N8N_SSRF_ALLOWED_HOSTNAMES"], "n8n-guard") {
			t.Errorf("%s: N8N_SSRF_ALLOWED_HOSTNAMES %q does not allow the guard (n8n-guard)", name, s.Environment["N8N_SSRF_ALLOWED_HOSTNAMES"])
		}
	}
	if len(n8ns) != 2 {
		t.Fatalf("n8n services %v, want n8n and its queue worker", n8ns)
	}

	raw, err = os.ReadFile(filepath.Join(dir, "compose.n8n-2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var o struct {
		Services map[string]struct {
			Image string `yaml:"image"`
		} `yaml:"services"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("compose.n8n-2.yaml: %v (it may change the images only)", err)
	}
	if len(o.Services) != len(n8ns) {
		t.Errorf("the 2.x override names %d services, want the %d n8n ones", len(o.Services), len(n8ns))
	}
	for _, name := range n8ns {
		if img := o.Services[name].Image; !strings.HasPrefix(img, image+":2.") {
			t.Errorf("the 2.x override gives %s the image %q, want n8n 2.x", name, img)
		}
	}
}

// The setup Job gives n8n's credential N8N_GUARD_TOKEN; without it the
// first of N8N_GUARD_TOKENS, and setup says so when there are several.
func TestSetupTokenSaysWhichOfSeveral(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
		warn bool
	}{
		{"N8N_GUARD_TOKEN", map[string]string{"N8N_GUARD_TOKEN": "n8n-tok", "N8N_GUARD_TOKENS": "person-tok,n8n-tok"}, "n8n-tok", false},
		{"one of N8N_GUARD_TOKENS", map[string]string{"N8N_GUARD_TOKENS": "only-tok"}, "only-tok", false},
		{"the first of several", map[string]string{"N8N_GUARD_TOKENS": "first-tok, second-tok"}, "first-tok", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			tok, err := setupToken(&out, func(k string) string { return c.env[k] }, t.TempDir())
			if err != nil || tok != c.want {
				t.Fatalf("token %q %v, want %q", tok, err, c.want)
			}
			if warned := strings.Contains(out.String(), "WARNING: N8N_GUARD_TOKENS holds 2 tokens"); warned != c.warn {
				t.Fatalf("output %q, want a warning: %v", out.String(), c.warn)
			}
		})
	}
}

// A release archive holds the images the docs show (console.md's
// screenshots) and the deploy files docs/deploy.md runs: compose,
// Kubernetes (but its validation module), the container recipe.
func TestReleaseArchivesCarryImagesAndDeployFiles(t *testing.T) {
	repo := filepath.Join("..", "..")
	out, err := exec.Command("bash", filepath.Join(repo, "deploy", "release.sh"), "--list").Output()
	if err != nil {
		t.Fatalf("release.sh --list: %v", err)
	}
	listed := map[string]bool{}
	for _, f := range strings.Fields(string(out)) {
		listed[f] = true
	}
	docs, _ := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	img := regexp.MustCompile(`\]\((img/[^)#\s]+)`)
	for _, d := range docs {
		raw, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range img.FindAllStringSubmatch(string(raw), -1) {
			if !listed["docs/"+m[1]] {
				t.Errorf("%s shows docs/%s, which the archive lacks", filepath.Base(d), m[1])
			}
		}
	}
	for _, dir := range []string{"deploy/compose", "deploy/kubernetes", "deploy/container"} {
		err := filepath.WalkDir(filepath.Join(repo, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				if d != nil && d.Name() == "validate" {
					return filepath.SkipDir // a test module, not a deploy file
				}
				return err
			}
			rel, _ := filepath.Rel(repo, p)
			if !listed[filepath.ToSlash(rel)] {
				t.Errorf("the archive lacks %s", rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// `n8n check` against an n8n 3.x that tells its version at /metrics says
// which n8n answered, where its version was read and that 3.x is not run
// here; and warns that n8n's SSRF protection, if on, refuses the guard's
// loopback address, naming the setting that allows it.
func TestN8nCheckOn3xSaysTheVersionAndWarnsOfSSRF(t *testing.T) {
	wfs, err := workflows.Shipped()
	if err != nil {
		t.Fatal(err)
	}
	handler := wfs[0]
	workflows.SetConfig(handler.Nodes, workflows.GuardURL, "http://127.0.0.1:8080")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/rest/settings":
			w.Write([]byte(`{"data":{"settingsMode":"public"}}`))
		case "/metrics":
			w.Write([]byte("n8n_version_info{version=\"v3.4.4\",major=\"3\",minor=\"4\",patch=\"4\"} 1\n"))
		case "/api/v1/workflows":
			_ = json.NewEncoder(w).Encode(map[string]any{"data": []any{map[string]any{"id": handler.ID, "name": handler.Name,
				"nodes": handler.Nodes, "connections": handler.Connections, "settings": handler.Settings, "activeVersionId": "v1"}}, "nextCursor": nil})
		case "/api/v1/credentials", "/api/v1/executions":
			w.Write([]byte(`{"data":[],"nextCursor":null}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	var out bytes.Buffer
	cmd := newRootCmd(env(map[string]string{"N8N_URL": srv.URL, "N8N_API_KEY": "key"}), &out, io.Discard)
	cmd.SetArgs([]string{"n8n", "check"})
	err = cmd.Execute()
	s := out.String()
	t.Log("\n" + s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"n8n 3.4.4 at " + srv.URL + " (read from n8n's metrics, GET /metrics)", "note: n8n 3.x is checked against n8n's documented 3.0 changes", "not run here",
		"WARNING: if n8n runs with N8N_SSRF_PROTECTION_ENABLED=true", "N8N_SSRF_ALLOWED_IP_RANGES=127.0.0.1/32"} {
		if !strings.Contains(s, want) {
			t.Errorf("the output does not say %q", want)
		}
	}
}
