package node

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/oci"
	"github.com/socklb/socklb/internal/testkit"
)

// SocklbImage is the name the overlay gives deploy/'s image.
const SocklbImage = "localhost/socklb:node"

// SocklbImageTarball builds socklb's image from the static binary bin
// (`make build`): the binary alone, as deploy/ runs it.
func SocklbImageTarball(bin, out string) error {
	img, err := oci.SocklbImage("amd64", bin, oci.Meta{Source: "https://github.com/socklb/socklb"})
	if err != nil {
		return err
	}
	return oci.WriteOCI(out, SocklbImage, img)
}

// overlay is what a user of this cluster changes in deploy/: the image,
// the device packets from other machines arrive on (each node's eth0 on
// the underlay), the cgroup to attach to (each node's own child of the run's cgroup,
// never the root: $(NODE_NAME) is expanded by kubelet from the
// DaemonSet's env), the external CIDR the ExternalIP tests use, and the
// API server's address, which the agent must reach without the
// `kubernetes` Service it has not programmed yet.
const overlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - {{base}}
images:
  - name: localhost/socklb
    newTag: node
patches:
  - target:
      kind: DaemonSet
      name: socklb
    patch: |-
      - op: test
        path: /spec/template/spec/containers/0/args/0
        value: --cgroup-path=/run/socklb/cgroupv2
      - op: replace
        path: /spec/template/spec/containers/0/args/0
        value: --cgroup-path=/run/socklb/cgroupv2/{{cgroup}}/$(NODE_NAME)
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --external-ip-cidrs={{external}}
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --devices={{device}}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_HOST, value: "{{host}}"}
      - op: add
        path: /spec/template/spec/containers/0/env/-
        value: {name: KUBERNETES_SERVICE_PORT, value: "{{port}}"}
`

// InstallSocklb applies deploy/ through a kustomize overlay, as a user
// would (`kubectl apply -k`), and waits until the agent serves
// (waitSocklbReady).
func (n *Cluster) InstallSocklb(repoRoot string) error {
	dir := filepath.Join(n.Dir, "socklb-overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base, err := filepath.Rel(dir, filepath.Join(repoRoot, "deploy"))
	if err != nil {
		return err
	}
	host, port := n.apiServer()
	k := strings.NewReplacer("{{base}}", base, "{{cgroup}}", n.Run, "{{external}}", ExternalCIDR, "{{device}}", UnderlayDevice, "{{host}}", host, "{{port}}", port).Replace(overlay)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return err
	}
	if out, err := n.Kubectl("apply", "-k", dir); err != nil {
		return fmt.Errorf("kubectl apply -k %s: %v\n%s", dir, err, out)
	}
	return n.waitSocklbReady()
}

// apiServer is the API server's host and port as pods on this node reach
// it without a Service: the agent must not depend on the `kubernetes`
// Service it has not programmed yet.
func (n *Cluster) apiServer() (host, port string) {
	host, port, _ = strings.Cut(strings.TrimPrefix(n.CP.Server, "https://"), ":")
	return host, port
}

// waitSocklbReady waits until the DaemonSet's pod on every node is Ready
// by its own probes, and checks where the hooks are: on each node's
// cgroup, and nothing on the root.
func (n *Cluster) waitSocklbReady() error {
	start := time.Now()
	if err := n.WaitFor("socklb's DaemonSet to be Ready", 3*time.Minute, func() error {
		ds, err := n.CP.Admin.AppsV1().DaemonSets("kube-system").Get(context.Background(), "socklb", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if int(ds.Status.NumberReady) != len(n.Nodes) {
			return fmt.Errorf("%d of %d ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
		return nil
	}); err != nil {
		return err
	}
	cluster.Logf("socklb DaemonSet Ready in %s", time.Since(start).Round(time.Millisecond))
	return n.CheckHooks(true)
}

// CheckHooks checks that socklb's programs are attached to every node's
// cgroup (or to none, want false), and that nothing is attached to the
// root or to the run's own cgroup above the nodes.
func (n *Cluster) CheckHooks(want bool) error {
	if err := RootCgroupClean(); err != nil {
		return err
	}
	_, v2, err := hierarchies()
	if err != nil {
		return err
	}
	for _, d := range []string{filepath.Join(v2, n.Run), filepath.Join(v2, n.Run, "harness")} {
		out, err := exec.Command("bpftool", "cgroup", "show", d).CombinedOutput()
		if err != nil {
			return fmt.Errorf("bpftool cgroup show %s: %v: %s", d, err, out)
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			return fmt.Errorf("BPF programs attached to %s, which is no node's:\n%s", d, s)
		}
	}
	for _, p := range n.Nodes {
		out, err := exec.Command("bpftool", "cgroup", "show", p.Cfg.CgroupV2).CombinedOutput()
		if err != nil {
			return fmt.Errorf("bpftool cgroup show %s: %v: %s", p.Cfg.CgroupV2, err, out)
		}
		has := strings.Contains(string(out), "connect4")
		if has != want {
			return fmt.Errorf("socklb's hooks on %s: %v, want %v:\n%s", p.Cfg.CgroupV2, has, want, out)
		}
	}
	return nil
}

// StartKubeProxy runs the real kube-proxy v1.37.2 in iptables mode, the
// control of the conformance run, in the node's network namespace (the
// node process calls it). The conntrack flags at 0 leave the machine-wide
// conntrack table size alone.
func StartKubeProxy(cfg *NodeConfig) (*testkit.Proc, error) {
	dir := filepath.Join(cfg.Dir, "kube-proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := testkit.StartProc("kube-proxy", filepath.Join(dir, "kube-proxy.log"), filepath.Join(cfg.Tools, "kube-proxy"),
		"--kubeconfig="+cfg.Kubeconfig,
		"--proxy-mode=iptables",
		"--hostname-override="+cfg.Spec.Name,
		"--cluster-cidr="+ClusterCIDR,
		"--conntrack-max-per-core=0",
		"--conntrack-min=0",
		"--v=2",
	)
	if err != nil {
		return nil, err
	}
	if err := p.WaitFor("kube-proxy's first sync", 60*time.Second, func() error {
		return cluster.HTTPOK(&httpClient, "http://127.0.0.1:10256/healthz", "", "lastUpdated")
	}); err != nil {
		p.Stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

var httpClient = http.Client{Timeout: 5 * time.Second}

// Kubectl runs the tools' kubectl as the admin.
func (n *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(n.Tools, "kubectl"), append([]string{"--kubeconfig", n.CP.AdminKubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
