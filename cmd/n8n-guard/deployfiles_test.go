package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// plainEnv are the variables serve and the client commands read directly
// (not bound to a flag).
var plainEnv = []string{"N8N_GUARD_TOKENS", "N8N_GUARD_TOKEN", "SLACK_BOT_TOKEN", "SLACK_API_URL",
	"SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "N8N_API_URL", "N8N_API_KEY", "N8N_URL", "N8N_WEBHOOK_URL", "N8N_GUARD_RESUME_ORIGINS", "N8N_GUARD_CONSOLE_SESSION_KEY", "N8N_GUARD_RESUME_SECRET", "N8N_GUARD_CHECK_SECRET", "N8N_GUARD_RESUME_PATH", "GOGC", "GOMEMLIMIT"}

// knownEnv is every variable the binary reads: plainEnv and those bound to
// a flag of any command.
func knownEnv() map[string]bool {
	known := map[string]bool{}
	for _, e := range plainEnv {
		known[e] = true
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				for _, e := range f.Annotations[envAnnotation] {
					known[e] = true
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(env(nil), io.Discard, io.Discard))
	return known
}

// checkArgs fails unless args name a command of the binary with flags it
// has (the command is parsed, not run).
func checkArgs(t *testing.T, where string, args []string) {
	t.Helper()
	root := newRootCmd(env(nil), io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd == root {
		t.Errorf("%s: %v is not a command of n8n-guard: %v", where, args, err)
		return
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("%s: %v: %v", where, args, err)
	}
}

// The compose file and the Kubernetes manifests use only commands, flags
// and variables the binary has, reference only Secret keys the Secret
// holds, and keep the bbolt StatefulSet at one replica. (A schema check
// of the manifests against the Kubernetes API is not run here: no cluster
// and no schema download; docs/deploy.md says so.)
func TestDeployFilesMatchTheBinary(t *testing.T) {
	known := knownEnv()
	dir := filepath.Join("..", "..", "deploy")

	t.Run("compose", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(dir, "compose", "compose.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Services map[string]struct {
				Image       string
				Entrypoint  []string
				Command     []string
				Environment map[string]string
			}
		}
		if err := yaml.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		guards := 0
		for name, s := range c.Services {
			if !strings.HasPrefix(s.Image, "n8n-guard") {
				continue
			}
			guards++
			args := s.Command
			if len(args) == 0 {
				args = []string{"serve"} // the image's CMD
			}
			checkArgs(t, "compose service "+name, args)
			for e := range s.Environment {
				if !known[e] {
					t.Errorf("compose service %s: n8n-guard reads no variable %s", name, e)
				}
			}
		}
		if guards != 2 || c.Services["n8n-guard-setup"].Command[0] != "n8n" {
			t.Fatalf("want the guard and its setup service, got %d guard services", guards)
		}
	})

	t.Run("kubernetes", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(dir, "kubernetes", "*.yaml"))
		secretKeys := map[string]bool{}
		type container struct {
			Name, Image string
			Args        []string
			Env         []struct {
				Name      string
				ValueFrom struct {
					SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
				} `yaml:"valueFrom"`
			}
			Ports []struct {
				Name          string
				ContainerPort int `yaml:"containerPort"`
			}
			LivenessProbe  map[string]any `yaml:"livenessProbe"`
			ReadinessProbe map[string]any `yaml:"readinessProbe"`
		}
		type doc struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string
			Metadata   struct{ Name string }
			StringData map[string]string `yaml:"stringData"`
			Spec       struct {
				Replicas *int
				Selector struct {
					MatchLabels map[string]string `yaml:"matchLabels"`
				}
				Template struct {
					Metadata struct{ Labels map[string]string }
					Spec     struct{ Containers []container }
				}
			}
		}
		var workloads []doc
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dec := yaml.NewDecoder(bytes.NewReader(raw))
			for {
				var d doc
				if err := dec.Decode(&d); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if d.APIVersion == "" || d.Kind == "" || d.Metadata.Name == "" {
					t.Errorf("%s: a document without apiVersion, kind or name", f)
				}
				switch d.Kind {
				case "Secret":
					for k := range d.StringData {
						secretKeys[k] = true
					}
				case "StatefulSet", "Deployment":
					workloads = append(workloads, d)
				}
			}
		}
		if len(workloads) != 2 {
			t.Fatalf("want the bbolt StatefulSet and the PostgreSQL Deployment, got %d workloads", len(workloads))
		}
		for _, w := range workloads {
			where := w.Kind + " " + w.Metadata.Name
			for k, v := range w.Spec.Selector.MatchLabels {
				if w.Spec.Template.Metadata.Labels[k] != v {
					t.Errorf("%s: the selector %s=%s does not match the pod's labels", where, k, v)
				}
			}
			if w.Kind == "StatefulSet" && (w.Spec.Replicas == nil || *w.Spec.Replicas != 1) {
				t.Errorf("%s: the bbolt store allows exactly one replica", where)
			}
			if w.Kind == "Deployment" && (w.Spec.Replicas == nil || *w.Spec.Replicas < 2) {
				t.Errorf("%s: the PostgreSQL variant is the one with several replicas", where)
			}
			for _, c := range w.Spec.Template.Spec.Containers {
				checkArgs(t, where, c.Args)
				usesPG := false
				for _, e := range c.Env {
					if !known[e.Name] {
						t.Errorf("%s: n8n-guard reads no variable %s", where, e.Name)
					}
					if ref := e.ValueFrom.SecretKeyRef; ref.Key != "" && !secretKeys[ref.Key] {
						t.Errorf("%s: %s refers to the Secret key %s, which secret.yaml does not have", where, e.Name, ref.Key)
					}
					usesPG = usesPG || e.Name == "N8N_GUARD_STORE"
				}
				if usesPG != (w.Kind == "Deployment") {
					t.Errorf("%s: the Deployment (several replicas) must use PostgreSQL, the StatefulSet bbolt", where)
				}
				if c.LivenessProbe == nil || c.ReadinessProbe == nil {
					t.Errorf("%s: probes missing", where)
				}
				if !slices.ContainsFunc(c.Ports, func(p struct {
					Name          string
					ContainerPort int `yaml:"containerPort"`
				}) bool {
					return p.Name == "http" && p.ContainerPort == 8080
				}) {
					t.Errorf("%s: no port http 8080 (the Service and probes use it)", where)
				}
			}
		}
	})
}
