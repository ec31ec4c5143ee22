package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The chart's checks that need helm but no cluster: they run wherever
// `make helm-tool` has built helm, as root or not.

// TestHelmValues: values.schema.json accepts values.yaml and refuses
// values of the wrong type, outside an enum or misspelt, naming the
// value; the templates refuse what the schema cannot explain; and the
// defaults of updateStrategy and the securityContexts render what
// deploy/base does (TestHelmChart compares the whole DaemonSet on a
// cluster).
func TestHelmValues(t *testing.T) {
	ds, _, _, _ := readDeploy(t)
	r := decodeRendered(t, "chart", helmTemplate(t))
	spec := r.ds.Spec.Template.Spec
	if !reflect.DeepEqual(r.ds.Spec.UpdateStrategy, ds.Spec.UpdateStrategy) {
		t.Errorf("updateStrategy %+v, deploy/base's %+v", r.ds.Spec.UpdateStrategy, ds.Spec.UpdateStrategy)
	}
	if !reflect.DeepEqual(spec.Containers[0].SecurityContext, ds.Spec.Template.Spec.Containers[0].SecurityContext) ||
		!reflect.DeepEqual(spec.InitContainers[0].SecurityContext, ds.Spec.Template.Spec.InitContainers[0].SecurityContext) {
		t.Errorf("securityContext %+v, init %+v: not deploy/base's", spec.Containers[0].SecurityContext, spec.InitContainers[0].SecurityContext)
	}

	// `helm upgrade --reuse-values` renders with the upgraded release's
	// values: one from before these keys has none of them.
	if old := helmTemplate(t, "--set", "updateStrategy=null,securityContext=null,mountCgroup=null"); old != helmTemplate(t) {
		t.Errorf("values without updateStrategy, securityContext and mountCgroup (an older release's) render otherwise than the defaults:\n%s", old)
	}

	t.Run("knobs", func(t *testing.T) {
		r := decodeRendered(t, "chart", helmTemplate(t, "--set", "updateStrategy.rollingUpdate.maxUnavailable=25%",
			"--set", "securityContext.seLinuxOptions.type=spc_t", "--set", "mountCgroup.securityContext.seLinuxOptions.type=spc_t"))
		if u := r.ds.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxUnavailable.String() != "25%" {
			t.Errorf("updateStrategy %+v", r.ds.Spec.UpdateStrategy)
		}
		// A field added keeps the defaults beside it (Helm merges maps).
		for _, sc := range []*corev1.SecurityContext{r.ds.Spec.Template.Spec.Containers[0].SecurityContext, r.ds.Spec.Template.Spec.InitContainers[0].SecurityContext} {
			if b, _ := json.Marshal(sc); sc == nil || sc.SELinuxOptions == nil || sc.SELinuxOptions.Type != "spc_t" ||
				sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil || len(sc.Capabilities.Add) == 0 {
				t.Errorf("securityContext %s: want the defaults and seLinuxOptions", b)
			}
		}
		// OnDelete takes no rollingUpdate: the default one is dropped.
		r = decodeRendered(t, "chart", helmTemplate(t, "--set", "updateStrategy.type=OnDelete"))
		if u := r.ds.Spec.UpdateStrategy; u.Type != "OnDelete" || u.RollingUpdate != nil {
			t.Errorf("OnDelete: updateStrategy %+v", u)
		}
	})

	// cleanup=true: on each node an init container unpins socklb's objects
	// and unmounts the init container's cgroup2, from the node's mount
	// namespace, then the pod waits; no agent, and nothing else of the
	// node is mounted. tests/node's helm uninstall runs it on real nodes.
	t.Run("cleanup", func(t *testing.T) {
		out := helmTemplate(t, "--set", "cleanup=true")
		spec := decodeRendered(t, "chart", out).ds.Spec.Template.Spec
		if len(spec.InitContainers) != 1 || strings.Join(spec.InitContainers[0].Command, " ") != "/socklb cleanup --bpffs-path=/sys/fs/bpf/socklb --unmount-cgroup=/run/socklb/cgroupv2" ||
			!reflect.DeepEqual(spec.InitContainers[0].SecurityContext, ds.Spec.Template.Spec.InitContainers[0].SecurityContext) {
			t.Errorf("init containers %+v: want one running socklb cleanup with mount-cgroup's securityContext", spec.InitContainers)
		}
		if len(spec.Containers) != 1 || strings.Join(spec.Containers[0].Command, " ") != "/socklb pause" || len(spec.Containers[0].SecurityContext.Capabilities.Add) != 0 {
			t.Errorf("containers %+v: want one `socklb pause` with no capability", spec.Containers)
		}
		if len(spec.Volumes) != 1 || spec.Volumes[0].HostPath == nil || spec.Volumes[0].HostPath.Path != "/sys/fs/bpf" {
			t.Errorf("volumes %+v: want the node's /sys/fs/bpf only", spec.Volumes)
		}
		if strings.Contains(out, "helm.sh/hook: test") {
			t.Error("cleanup mode renders the helm test pod, which would fail on a cleaned node")
		}
		if !strings.Contains(helmTemplate(t), "helm.sh/hook: test") {
			t.Error("no helm test pod by default")
		}
		// A pod the DaemonSet's selector matches is the DaemonSet's:
		// it adopts the test pod and deletes it (seen on a real node).
		test, _ := helm(t, "template", "socklb", filepath.Join(root, "charts/socklb"), "--show-only", "templates/tests/connect.yaml")
		if strings.Contains(test, "app.kubernetes.io/name: socklb\n") {
			t.Errorf("the helm test pod carries the DaemonSet's selector label:\n%s", test)
		}
	})

	// config: a SocklbConfiguration in the ConfigMap socklb-config, read
	// through --config, and rolled out by a checksum; the agent takes the
	// rendered file as it is (its --write-config-to shows the fields), and
	// a misspelt field is refused by name.
	t.Run("config", func(t *testing.T) {
		agentConfig := func(t *testing.T, sets ...string) (string, error) {
			out := helmTemplate(t, sets...)
			r := decodeRendered(t, "chart", out)
			spec := r.ds.Spec.Template.Spec
			cm, ok := r.configMaps["socklb-config"]
			if !ok || !slices.Contains(spec.Containers[0].Args, "--config=/etc/socklb/config.yaml") ||
				r.ds.Spec.Template.Annotations["checksum/config"] == "" {
				t.Fatalf("ConfigMap socklb-config %v, args %q, annotations %v: want the ConfigMap, --config and a checksum",
					ok, spec.Containers[0].Args, r.ds.Spec.Template.Annotations)
			}
			var mounted bool
			for _, m := range spec.Containers[0].VolumeMounts {
				for _, v := range spec.Volumes {
					mounted = mounted || (m.Name == v.Name && m.MountPath == "/etc/socklb" && v.ConfigMap != nil && v.ConfigMap.Name == "socklb-config")
				}
			}
			if !mounted {
				t.Errorf("socklb-config is not mounted at /etc/socklb: %+v", spec.Volumes)
			}
			dir := t.TempDir()
			file, effective := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "effective.yaml")
			if err := os.WriteFile(file, []byte(cm.Data["config.yaml"]), 0o600); err != nil {
				t.Fatal(err)
			}
			b, err := exec.Command(socklbBin, "agent", "--config", file, "--write-config-to", effective).CombinedOutput()
			if err != nil {
				return string(b), err
			}
			b, err = os.ReadFile(effective)
			return string(b), err
		}
		got, err := agentConfig(t, "--set", "config.terminateSockets=all", "--set", "config.nodePortAddresses={primary}")
		if err != nil || !strings.Contains(got, "terminateSockets: all\n") || !strings.Contains(got, "nodePortAddresses:\n- primary\n") {
			t.Errorf("the agent's configuration from the chart's config: %v\n%s", err, got)
		}
		if got, err := agentConfig(t, "--set", "config.terminateSocket=all"); err == nil || !strings.Contains(got, `unknown field "terminateSocket"`) {
			t.Errorf("a misspelt field: %v\n%s", err, got)
		}
		if strings.Contains(helmTemplate(t), "socklb-config") {
			t.Error("a ConfigMap without config")
		}
	})

	t.Run("mistakes", func(t *testing.T) {
		for _, c := range []struct {
			set  string
			want string
		}{
			// values.schema.json
			{"kubeProxy.mode=besides", "at '/kubeProxy/mode': value must be one of 'replace', 'beside'"},
			{"kubeproxy.mode=beside", "additional properties 'kubeproxy' not allowed"},
			{"image.pullPolicy=always", "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
			{"maps.maxServices=many", "at '/maps/maxServices'"},
			{"maps.maxBackends=0", "at '/maps/maxBackends'"},
			{"healthz.port=70000", "at '/healthz/port'"},
			{"conntrack.tcpTimeoutEstablished=1day", "at '/conntrack/tcpTimeoutEstablished'"},
			{"updateStrategy.type=Recreate", "at '/updateStrategy/type': value must be one of 'RollingUpdate', 'OnDelete'"},
			{"securityContext.privileged=yes", "at '/securityContext/privileged': got string, want boolean"},
			{"extraArgs={terminate-sockets=udp}", "at '/extraArgs/0': 'terminate-sockets=udp' does not match pattern"},
			{"cleanup=yes", "at '/cleanup': got string, want boolean"},
			{"tolerations[0].operator=Exist", "at '/tolerations/0/operator': value must be one of 'Exists', 'Equal'"},
			// the templates' fail: rules with a reason
			{"updateStrategy.rollingUpdate.maxSurge=1", "leave maxSurge unset (0) and set maxUnavailable"},
			{"metrics.service.enabled=true", "set metrics.bindAddress=0.0.0.0"},
			{"metrics.serviceMonitor.enabled=true", "needs metrics.service.enabled"},
		} {
			out, err := helm(t, "template", "socklb", filepath.Join(root, "charts/socklb"), "--set", c.set)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("--set %s: err %v, output lacks %q:\n%s", c.set, err, c.want, out)
			}
		}
	})
}

// TestHelmNotesKubeProxy: installing in replace mode where kube-proxy's
// DaemonSet still runs prints a warning naming it and both fixes; beside
// mode, no kube-proxy, or one scheduled on no node prints none. NOTES'
// lookup needs an API server: a fake one on loopback answers what `helm
// install --dry-run=server` asks (discovery, the release's Secrets, the
// lookup, a GET of each rendered object).
func TestHelmNotesKubeProxy(t *testing.T) {
	const warning = "WARNING: kubeProxy.mode=replace, but kube-proxy still runs"
	for _, c := range []struct {
		name      string
		kubeProxy map[string]any // nil: none
		set       string
		want      []string
	}{
		{"replace beside a running kube-proxy", kubeProxyDS(3), "kubeProxy.mode=replace", []string{
			warning, "(DaemonSet\nkube-system/kube-proxy, on 3 nodes)", "listens on 10256 and 10249, kube-proxy's\nports",
			"helm upgrade socklb charts/socklb -n kube-system --reuse-values --set kubeProxy.mode=beside",
			"kubectl -n kube-system delete daemonset kube-proxy", "kube-proxy --cleanup", "docs/migrate-from-kube-proxy.md"}},
		{"replace on other ports", kubeProxyDS(3), "healthz.port=20256,metrics.port=20249", []string{warning, "listens on 20256 and 20249.\n"}},
		{"beside", kubeProxyDS(3), "kubeProxy.mode=beside", nil},
		{"no kube-proxy", nil, "kubeProxy.mode=replace", nil},
		{"kube-proxy on no node", kubeProxyDS(0), "kubeProxy.mode=replace", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			kubeconfig := fakeAPIServer(t, c.kubeProxy)
			out, err := helm(t, "install", "socklb", filepath.Join(root, "charts/socklb"), "-n", "kube-system", "--kubeconfig", kubeconfig,
				"--dry-run=server", "--disable-openapi-validation", "--set", c.set, "--set", "apiServer.host=192.0.2.10")
			if err != nil {
				t.Fatalf("helm install --dry-run=server: %v\n%s", err, out)
			}
			_, notes, ok := strings.Cut(out, "NOTES:\n")
			if !ok {
				t.Fatalf("no NOTES:\n%s", out)
			}
			if c.want == nil && strings.Contains(notes, "WARNING") {
				t.Errorf("a warning where there is no conflict:\n%s", notes)
			}
			for _, w := range c.want {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
		})
	}
}

func kubeProxyDS(nodes int) map[string]any {
	return map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "kube-proxy", "namespace": "kube-system", "labels": map[string]any{"k8s-app": "kube-proxy"}},
		"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"k8s-app": "kube-proxy"}}},
		"status":   map[string]any{"desiredNumberScheduled": nodes, "numberReady": nodes},
	}
}

// fakeAPIServer serves, on loopback, the little of the API that helm's
// install reads, holding no object but kubeProxy (if not nil); it writes
// a kubeconfig for it. It fails the test on a request it does not know
// (a write, say), rather than answer it wrongly.
func fakeAPIServer(t *testing.T, kubeProxy map[string]any) string {
	t.Helper()
	resources := func(gv string, rs ...string) map[string]any {
		var list []map[string]any
		for _, r := range rs {
			name, kind, _ := strings.Cut(r, ":")
			namespaced := !strings.HasPrefix(kind, "!")
			kind = strings.TrimPrefix(kind, "!")
			list = append(list, map[string]any{"name": name, "singularName": "", "namespaced": namespaced, "kind": kind,
				"verbs": []string{"create", "delete", "get", "list", "patch", "update", "watch"}})
		}
		return map[string]any{"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": list}
	}
	group := func(name string) map[string]any {
		gv := map[string]any{"groupVersion": name + "/v1", "version": "v1"}
		return map[string]any{"name": name, "versions": []any{gv}, "preferredVersion": gv}
	}
	fixed := map[string]any{
		"/version": map[string]any{"major": "1", "minor": "34", "gitVersion": "v1.34.0", "platform": "linux/amd64"},
		"/api":     map[string]any{"kind": "APIVersions", "versions": []string{"v1"}},
		"/apis": map[string]any{"kind": "APIGroupList", "apiVersion": "v1",
			"groups": []any{group("apps"), group("rbac.authorization.k8s.io")}},
		"/api/v1":                                resources("v1", "secrets:Secret", "serviceaccounts:ServiceAccount", "services:Service", "configmaps:ConfigMap", "namespaces:!Namespace"),
		"/apis/apps/v1":                          resources("apps/v1", "daemonsets:DaemonSet"),
		"/apis/rbac.authorization.k8s.io/v1":     resources("rbac.authorization.k8s.io/v1", "clusterroles:!ClusterRole", "clusterrolebindings:!ClusterRoleBinding"),
		"/api/v1/namespaces/kube-system/secrets": map[string]any{"kind": "SecretList", "apiVersion": "v1", "items": []any{}},
	}
	if kubeProxy != nil {
		fixed["/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy"] = kubeProxy
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet {
			t.Errorf("fake API server: %s %s: helm install --dry-run wrote", r.Method, r.URL)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if body, ok := fixed[r.URL.Path]; ok {
			_ = json.NewEncoder(w).Encode(body)
			return
		}
		// Any single object: not found, as on an empty cluster.
		if strings.Count(r.URL.Path, "/") >= 4 {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
				"message": fmt.Sprintf("%s not found", r.URL.Path)})
			return
		}
		t.Errorf("fake API server: unexpected GET %s", r.URL)
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: %q}}]
users: [{name: fake, user: {token: fake}}]
contexts: [{name: fake, context: {cluster: fake, user: fake, namespace: kube-system}}]
current-context: fake
`, srv.URL)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}
