package e2e

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// helmLabels are the labels the chart adds on top of deploy/'s.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart"}

// helm runs the helm that tests/tools/helm/build.sh builds (`make
// helm-tool`, part of `make e2e`).
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("sh", filepath.Join(root, "tests/tools/helm/build.sh"), "--bin").Output()
	if err != nil {
		t.Fatalf("tests/tools/helm/build.sh --bin: %v", err)
	}
	bin := strings.TrimSpace(string(out))
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("helm not built (%s): run `make helm-tool` (`make e2e` does)", bin)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func helmTemplate(t *testing.T, args ...string) string {
	t.Helper()
	out, err := helm(t, append([]string{"template", "socklb", filepath.Join(root, "charts/socklb"), "--namespace", "kube-system"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return out
}

// objects decodes a multi-document render into kind/name -> object, with
// Helm's labels removed.
func objects(t *testing.T, what, out string) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	for _, doc := range strings.Split(out, "\n---") {
		var o map[string]any
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if o == nil {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		if labels, ok := meta["labels"].(map[string]any); ok {
			for _, l := range helmLabels {
				delete(labels, l)
			}
		}
		objs[o["kind"].(string)+"/"+meta["name"].(string)] = o
	}
	return objs
}

// TestHelmChart: the chart renders what deploy/ and its beside-kube-proxy
// overlay render (so the two cannot drift), its knobs land where the
// agent reads them, the API server accepts the result, and wrong values
// fail with a message naming the fix.
func TestHelmChart(t *testing.T) {
	needCluster(t)
	for _, c := range []struct {
		dir  string
		sets []string
	}{
		{"deploy", nil},
		{"deploy/overlays/beside-kube-proxy", []string{"--set", "kubeProxy.mode=beside"}},
	} {
		t.Run("same as "+c.dir, func(t *testing.T) {
			kz, err := kubectl("kustomize", filepath.Join(root, c.dir))
			if err != nil {
				t.Fatalf("kubectl kustomize %s: %v\n%s", c.dir, err, kz)
			}
			// --skip-tests: the `helm test` pod is the chart's own.
			want, got := objects(t, c.dir, kz), objects(t, "chart", helmTemplate(t, append(c.sets, "--skip-tests")...))
			for k := range want {
				if _, ok := got[k]; !ok {
					t.Errorf("the chart lacks %s", k)
				} else if !reflect.DeepEqual(got[k], want[k]) {
					g, _ := yaml.Marshal(got[k])
					w, _ := yaml.Marshal(want[k])
					t.Errorf("%s differs from %s's:\nchart:\n%s\nkustomize:\n%s", k, c.dir, g, w)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					t.Errorf("the chart renders %s, which %s does not", k, c.dir)
				}
			}
		})
	}

	t.Run("knobs", func(t *testing.T) {
		out := helmTemplate(t,
			"--set", "image.repository=registry.example.com/socklb,image.tag=0.1.0,image.pullPolicy=Always",
			"--set", "cgroupPath=/run/socklb/cgroupv2/kubepods",
			"--set", "maps.maxServices=200000,maps.maxBackends=2000000,maps.maxAffinity=300000",
			"--set", "externalIPCIDRs={203.0.113.0/24,2001:db8::/64}",
			"--set", "apiServer.host=192.0.2.10,apiServer.port=6443",
			"--set", "metrics.bindAddress=0.0.0.0,metrics.service.enabled=true",
			"--set", "nodeSelector.pool=edge",
			"--set", "tolerations[0].key=dedicated,tolerations[0].operator=Equal,tolerations[0].value=edge,tolerations[0].effect=NoSchedule",
			"--set", "resources.limits.memory=512Mi",
			"--set", "config.terminateSockets=all",
		)
		r := decodeRendered(t, "chart", out)
		c := r.ds.Spec.Template.Spec.Containers[0]
		args := strings.Join(c.Args, " ")
		for _, want := range []string{"--cgroup-path=/run/socklb/cgroupv2/kubepods", "--max-services=200000", "--max-backends=2000000", "--max-affinity=300000",
			"--external-ip-cidrs=203.0.113.0/24,2001:db8::/64", "--metrics-bind-address=0.0.0.0:10249", "--healthz-bind-address=0.0.0.0:10256"} {
			if !strings.Contains(args, want) {
				t.Errorf("agent args %q lack %q", args, want)
			}
		}
		if c.Image != "registry.example.com/socklb:0.1.0" || c.ImagePullPolicy != "Always" || r.ds.Spec.Template.Spec.InitContainers[0].Image != c.Image {
			t.Errorf("image %q %q, init %q", c.Image, c.ImagePullPolicy, r.ds.Spec.Template.Spec.InitContainers[0].Image)
		}
		if host, port := apiServerEnv(r, c); host != "192.0.2.10" || port != "6443" {
			t.Errorf("KUBERNETES_SERVICE_HOST=%q PORT=%q, want 192.0.2.10 6443", host, port)
		}
		spec := r.ds.Spec.Template.Spec
		if spec.NodeSelector["pool"] != "edge" || len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "dedicated" {
			t.Errorf("nodeSelector %v tolerations %+v", spec.NodeSelector, spec.Tolerations)
		}
		if c.Resources.Limits.Memory().String() != "512Mi" {
			t.Errorf("resources %+v", c.Resources)
		}
		if !strings.Contains(out, "kind: Service\n") || !strings.Contains(out, "name: socklb-metrics") {
			t.Errorf("metrics.service.enabled rendered no socklb-metrics Service")
		}
		f := filepath.Join(t.TempDir(), "chart.yaml")
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		if res, err := kubectl("apply", "--dry-run=server", "--validate=strict", "-f", f); err != nil {
			t.Fatalf("the API server rejects the chart's render: %v\n%s", err, res)
		}
		// The cleanup mode's DaemonSet too.
		if err := os.WriteFile(f, []byte(helmTemplate(t, "--set", "cleanup=true")), 0o644); err != nil {
			t.Fatal(err)
		}
		if res, err := kubectl("apply", "--dry-run=server", "--validate=strict", "-f", f); err != nil {
			t.Fatalf("the API server rejects the chart's cleanup mode: %v\n%s", err, res)
		}
	})

	// The ServiceMonitor goes through the API server like the rest, against
	// prometheus-operator's own CRD: a render alone would pass a field the
	// operator's schema does not have, and the operator would never see it.
	t.Run("ServiceMonitor", func(t *testing.T) {
		installCRD(t, "monitoring.coreos.com_servicemonitors.yaml", "servicemonitors.monitoring.coreos.com")
		out := helmTemplate(t, "--set", "metrics.bindAddress=0.0.0.0,metrics.service.enabled=true,metrics.serviceMonitor.enabled=true",
			"--set", "metrics.serviceMonitor.labels.release=prometheus")
		objs := objects(t, "chart", out)
		if _, ok := objs["ServiceMonitor/socklb"]; !ok {
			t.Fatalf("no ServiceMonitor/socklb in %v", slices.Collect(maps.Keys(objs)))
		}
		f := filepath.Join(t.TempDir(), "chart.yaml")
		if err := os.WriteFile(f, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := kubectl("apply", "--dry-run=server", "--validate=strict", "-f", f)
		if err != nil {
			t.Fatalf("the API server rejects the chart's render with the ServiceMonitor: %v\n%s", err, res)
		}
		if !strings.Contains(res, "servicemonitor.monitoring.coreos.com/socklb created (server dry run)") {
			t.Errorf("the dry-run did not reach the ServiceMonitor:\n%s", res)
		}
	})
}
