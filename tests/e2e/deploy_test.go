package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/socklb/socklb/internal/testkit"
)

// deployDirs are the kustomizations a user applies: the plain install and
// the two ways docs/install.md describes.
var deployDirs = []string{"deploy", "deploy/overlays/replace-kube-proxy", "deploy/overlays/beside-kube-proxy"}

// TestDeployDryRunServer: the real API server accepts every manifest of
// deploy/ and of each overlay (admission, defaulting, strict field
// validation), as `kubectl apply --dry-run=server -k` on a cluster would.
func TestDeployDryRunServer(t *testing.T) {
	needCluster(t)
	for _, dir := range deployDirs {
		t.Run(dir, func(t *testing.T) {
			out, err := kubectl("apply", "--dry-run=server", "--validate=strict", "-k", filepath.Join(root, dir))
			t.Logf("kubectl apply --dry-run=server -k %s:\n%s", dir, out)
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			want := []string{"serviceaccount/socklb", "clusterrole.rbac.authorization.k8s.io/socklb",
				"clusterrolebinding.rbac.authorization.k8s.io/socklb", "daemonset.apps/socklb created (server dry run)"}
			if strings.HasSuffix(dir, "replace-kube-proxy") {
				want = append(want, "configmap/socklb-apiserver-")
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q", w)
				}
			}
		})
	}
}

// readDeploy decodes every document of deploy/base/*.yaml strictly.
func readDeploy(t *testing.T) (ds *appsv1.DaemonSet, sa *corev1.ServiceAccount, role *rbacv1.ClusterRole, binding *rbacv1.ClusterRoleBinding) {
	t.Helper()
	mroot := root
	if mroot == "" {
		var err error
		if mroot, err = testkit.ModuleRoot(); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob(filepath.Join(mroot, "deploy", "base", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/base/*.yaml: %v", err)
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---")) {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			var into any
			switch meta.Kind {
			case "":
				continue
			case "DaemonSet":
				ds = &appsv1.DaemonSet{}
				into = ds
			case "ServiceAccount":
				sa = &corev1.ServiceAccount{}
				into = sa
			case "ClusterRole":
				role = &rbacv1.ClusterRole{}
				into = role
			case "ClusterRoleBinding":
				binding = &rbacv1.ClusterRoleBinding{}
				into = binding
			default:
				t.Fatalf("%s: unexpected kind %s", f, meta.Kind)
			}
			if err := yaml.UnmarshalStrict(doc, into); err != nil {
				t.Fatalf("%s: %s: %v", f, meta.Kind, err)
			}
		}
	}
	if ds == nil || sa == nil || role == nil || binding == nil {
		t.Fatalf("deploy/ lacks a DaemonSet, ServiceAccount, ClusterRole or ClusterRoleBinding")
	}
	return ds, sa, role, binding
}

// TestDeployManifests checks, without a cluster, that the manifests hang
// together and say what docs/install.md promises.
func TestDeployManifests(t *testing.T) {
	ds, sa, role, binding := readDeploy(t)
	spec := ds.Spec.Template.Spec
	if ds.Namespace != "kube-system" || sa.Namespace != "kube-system" || sa.Name != saName {
		t.Errorf("DaemonSet in %q, ServiceAccount %s/%s: want both in kube-system, ServiceAccount %s", ds.Namespace, sa.Namespace, sa.Name, saName)
	}
	if spec.ServiceAccountName != sa.Name {
		t.Errorf("DaemonSet runs as %q, the ServiceAccount is %q", spec.ServiceAccountName, sa.Name)
	}
	if binding.RoleRef.Name != role.Name || len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != sa.Namespace {
		t.Errorf("ClusterRoleBinding %+v does not bind ClusterRole %s to %s/%s", binding, role.Name, sa.Namespace, sa.Name)
	}
	var rules []string
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					name := res
					if g != "" {
						name = res + "." + g
					}
					rules = append(rules, v+" "+name)
				}
			}
		}
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("unexpected rule %+v", r)
		}
	}
	slices.Sort(rules)
	if !slices.Equal(rules, wantRBAC) {
		t.Errorf("ClusterRole grants %v, want %v", rules, wantRBAC)
	}

	if !spec.HostNetwork || spec.PriorityClassName != "system-node-critical" {
		t.Errorf("hostNetwork %v priorityClassName %q", spec.HostNetwork, spec.PriorityClassName)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists || spec.Tolerations[0].Key != "" {
		t.Errorf("tolerations %+v, want one {operator: Exists}", spec.Tolerations)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	var nodeNameEnv bool
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			nodeNameEnv = true
		}
	}
	if !nodeNameEnv {
		t.Error("NODE_NAME does not come from the downward API (spec.nodeName)")
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--cgroup-path=/run/socklb/cgroupv2", "--bpffs-path=/sys/fs/bpf/", "--healthz-bind-address=0.0.0.0:10256"} {
		if !strings.Contains(args, want) {
			t.Errorf("agent args %q lack %q", args, want)
		}
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		if p.Protocol != corev1.ProtocolTCP {
			t.Errorf("port %+v is not TCP", p)
		}
		ports[p.Name] = p.ContainerPort
	}
	if len(ports) != 2 || ports["healthz"] != 10256 || ports["metrics"] != 10249 {
		t.Errorf("container ports %+v, want healthz 10256 and metrics 10249 (kube-proxy's), named", c.Ports)
	}
	// A probe on a port the agent does not listen on kills it once the
	// startup probe gives up: each must reach --healthz-bind-address.
	for name, pr := range map[string]struct {
		probe *corev1.Probe
		path  string
	}{"startup": {c.StartupProbe, "/livez"}, "liveness": {c.LivenessProbe, "/livez"}, "readiness": {c.ReadinessProbe, "/healthz"}} {
		probe := pr.probe
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != pr.path {
			t.Errorf("%s probe %+v, want httpGet %s on the health port", name, probe, pr.path)
			continue
		}
		port := probe.HTTPGet.Port
		if port.IntValue() != 10256 && ports[port.String()] != 10256 {
			t.Errorf("%s probe on port %s, want 10256 (or the port named for it)", name, port.String())
		}
	}
	// The startup probe must outlast a rolling update's wait for the old
	// agent's pin lock (--lock-timeout, 1m) plus adopting its pins.
	if sp := c.StartupProbe; sp != nil && sp.PeriodSeconds*sp.FailureThreshold < 120 {
		t.Errorf("startup probe gives up after %ds, want at least 120s (lock wait + datapath open)", sp.PeriodSeconds*sp.FailureThreshold)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	// HostToContainer: the only propagation a container that is not
	// privileged may have, and enough to see the init container's mounts.
	if m, ok := mounts["/sys/fs/bpf"]; !ok || hostPaths[m.Name] != "/sys/fs/bpf" || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("/sys/fs/bpf: mount %+v, hostPath %q; want the host's, HostToContainer", m, hostPaths[m.Name])
	}
	if m, ok := mounts["/host/proc/sys/net"]; !ok || hostPaths[m.Name] != "/proc/sys/net" || !slices.Contains(c.Args, "--proc-sys-net=/host/proc/sys/net") {
		t.Errorf("/host/proc/sys/net: mount %+v, hostPath %q, args %q; want the node's /proc/sys/net there and --proc-sys-net naming it", m, hostPaths[m.Name], c.Args)
	}
	for _, ct := range append([]corev1.Container{c}, spec.InitContainers...) {
		sc := ct.SecurityContext
		if b, _ := json.Marshal(sc); sc == nil || sc.Privileged == nil || *sc.Privileged || sc.Capabilities == nil ||
			!slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) == 0 ||
			sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
			sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("container %s: securityContext %s; want privileged false, drop ALL and add a list, RuntimeDefault seccomp, a read-only root", ct.Name, b)
		}
		for _, m := range ct.VolumeMounts {
			if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
				t.Errorf("container %s: %s is Bidirectional, which only a privileged container may be", ct.Name, m.MountPath)
			}
		}
	}
	if m, ok := mounts["/run/socklb/cgroupv2"]; !ok || hostPaths[m.Name] != "/run/socklb/cgroupv2" {
		t.Errorf("/run/socklb/cgroupv2: mount %+v, hostPath %q", m, hostPaths[m.Name])
	}
	if len(spec.InitContainers) != 1 || !strings.Contains(strings.Join(spec.InitContainers[0].Command, " "), "/socklb mount-cgroup") ||
		spec.InitContainers[0].Image != c.Image {
		t.Errorf("no init container mounting cgroup2 with socklb's own image: %+v", spec.InitContainers)
	}
	// Socket termination walks the hooked cgroup's processes in /proc.
	if !spec.HostPID {
		t.Error("hostPID is off: socket termination cannot see pod processes")
	}
	if spec.DNSPolicy != corev1.DNSDefault {
		t.Errorf("dnsPolicy %q: the agent must not depend on cluster DNS, a Service it programs itself", spec.DNSPolicy)
	}
}
