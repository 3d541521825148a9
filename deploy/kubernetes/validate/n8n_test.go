package validate

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The n8n the manifests ship (deploy/kubernetes/n8n): n8n 3.x's image,
// decoded strictly, with its binary data (.n8n/storage on 3.x) on the
// volume, and no volume on .n8n/binaryData or .n8n/storage alone (with
// both folders present after an upgrade, n8n 3.x does not start); and the
// 2.x variant, a kustomize overlay that changes the image's tag only.
func TestN8nManifestsShip3xAndKeepA2xVariant(t *testing.T) {
	const image = "docker.n8n.io/n8nio/n8n"
	raw, err := os.ReadFile("../n8n/n8n.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sts *appsv1.StatefulSet
	for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("#%d: %v", i, err)
		}
		switch meta.Kind {
		case "StatefulSet":
			sts = &appsv1.StatefulSet{}
			err = yaml.UnmarshalStrict(doc, sts)
		case "Service":
			err = yaml.UnmarshalStrict(doc, &corev1.Service{})
		default:
			t.Fatalf("#%d: kind %q", i, meta.Kind)
		}
		if err != nil {
			t.Fatalf("#%d (%s): %v", i, meta.Kind, err)
		}
	}
	if sts == nil || len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("no n8n StatefulSet with one container")
	}
	c := sts.Spec.Template.Spec.Containers[0]
	if !strings.HasPrefix(c.Image, image+":3.") {
		t.Errorf("image %q, want n8n 3.x (%s:3.…)", c.Image, image)
	}
	const home, storage = "/home/node/.n8n", "/home/node/.n8n/storage"
	holdsStorage := false
	for _, m := range c.VolumeMounts {
		switch p := strings.TrimRight(m.MountPath, "/"); {
		case p == home+"/binaryData" || p == storage:
			t.Errorf("a volume mounted at %s alone: mount all of %s (3.x renames binaryData to storage inside it)", p, home)
		case p == home:
			holdsStorage = slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(v corev1.PersistentVolumeClaim) bool { return v.Name == m.Name })
		}
	}
	if !holdsStorage {
		t.Errorf("no persistent volume holds %s", storage)
	}
	for _, e := range c.Env {
		if e.Name == "N8N_MIGRATE_FS_STORAGE_PATH" || (e.Name == "N8N_DEFAULT_BINARY_DATA_MODE" && e.Value == "default") {
			t.Errorf("%s=%s: removed in n8n 3.0", e.Name, e.Value)
		}
	}

	type kustomization struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
		Images     []struct {
			Name   string `json:"name"`
			NewTag string `json:"newTag"`
		} `json:"images"`
	}
	var base, v2 kustomization
	for f, k := range map[string]*kustomization{"../n8n/kustomization.yaml": &base, "../n8n/n8n-2.x/kustomization.yaml": &v2} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, k); err != nil || k.Kind != "Kustomization" {
			t.Fatalf("%s: %v (kind %q)", f, err, k.Kind)
		}
	}
	if !slices.Equal(base.Resources, []string{"n8n.yaml"}) || len(base.Images) != 0 {
		t.Errorf("the base kustomization: %+v, want n8n.yaml as it is", base)
	}
	if !slices.Equal(v2.Resources, []string{"../"}) || len(v2.Images) != 1 || v2.Images[0].Name != image || !strings.HasPrefix(v2.Images[0].NewTag, "2.") {
		t.Errorf("the 2.x overlay: %+v, want the base with %s's tag set to a 2.x", v2, image)
	}
}
