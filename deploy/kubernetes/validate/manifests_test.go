// Package validate decodes the Kubernetes manifests of deploy/kubernetes
// strictly into the Kubernetes API's own Go types (k8s.io/api): an
// unknown or misspelt field, a wrong type or a missing kind fails. It is
// its own module so that n8n-guard itself does not depend on k8s.io.
//
//	cd deploy/kubernetes/validate && go test ./...
//
// This is a schema check without a cluster; admission (defaults,
// validation webhooks, quotas) is not run.
package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

func TestManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob("../*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(raw, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			var meta struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s #%d: %v", f, i, err)
			}
			var obj any
			switch meta.APIVersion + "/" + meta.Kind {
			case "apps/v1/StatefulSet":
				obj = &appsv1.StatefulSet{}
			case "apps/v1/Deployment":
				obj = &appsv1.Deployment{}
			case "v1/Service":
				obj = &corev1.Service{}
			case "v1/Secret":
				obj = &corev1.Secret{}
			case "v1/ConfigMap":
				obj = &corev1.ConfigMap{}
			case "batch/v1/Job":
				obj = &batchv1.Job{}
			case "networking.k8s.io/v1/Ingress":
				obj = &networkingv1.Ingress{}
			case "networking.k8s.io/v1/NetworkPolicy":
				obj = &networkingv1.NetworkPolicy{}
			case "policy/v1/PodDisruptionBudget":
				obj = &policyv1.PodDisruptionBudget{}
			default:
				t.Errorf("%s #%d: %s %s is not a kind this check knows", f, i, meta.APIVersion, meta.Kind)
				continue
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Errorf("%s #%d (%s): %v", filepath.Base(f), i, meta.Kind, err)
			}
			kinds[meta.Kind]++
		}
	}
	for _, k := range []string{"StatefulSet", "Deployment", "Service", "Secret", "ConfigMap", "Job", "Ingress", "NetworkPolicy"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among %v", k, kinds)
		}
	}
	t.Logf("decoded %v", kinds)
}
