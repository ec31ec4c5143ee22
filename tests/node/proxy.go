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
	img, err := oci.SocklbImage("amd64", bin)
	if err != nil {
		return err
	}
	return oci.WriteOCI(out, SocklbImage, img)
}

// overlay is what a user of this node changes in deploy/: the image, the
// cgroup to attach to (the run's child, never the root), and the API
// server's address, which the agent must reach without the `kubernetes`
// Service it has not programmed yet.
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
        value: --cgroup-path=/run/socklb/cgroupv2/{{cgroup}}
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
func (n *Node) InstallSocklb(repoRoot string) error {
	dir := filepath.Join(n.Dir, "socklb-overlay")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base, err := filepath.Rel(dir, filepath.Join(repoRoot, "deploy"))
	if err != nil {
		return err
	}
	host, port := n.apiServer()
	k := strings.NewReplacer("{{base}}", base, "{{cgroup}}", n.Cgroups.Name, "{{host}}", host, "{{port}}", port).Replace(overlay)
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
func (n *Node) apiServer() (host, port string) {
	host, port, _ = strings.Cut(strings.TrimPrefix(n.CP.Server, "https://"), ":")
	return host, port
}

// waitSocklbReady waits until the DaemonSet's pod is Ready by its own
// probes, and checks where the hooks are: on the run's cgroup, and
// nothing on the root.
func (n *Node) waitSocklbReady() error {
	start := time.Now()
	if err := n.Kubelet.WaitFor("socklb's DaemonSet to be Ready", 3*time.Minute, func() error {
		ds, err := n.CP.Admin.AppsV1().DaemonSets("kube-system").Get(context.Background(), "socklb", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Status.NumberReady != 1 {
			return fmt.Errorf("%d of %d ready", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
		return nil
	}); err != nil {
		return err
	}
	cluster.Logf("socklb DaemonSet Ready in %s", time.Since(start).Round(time.Millisecond))
	return n.CheckHooks(true)
}

// CheckHooks checks that socklb's programs are attached to the run's
// cgroup (or not, want false) and that nothing is attached to the root.
func (n *Node) CheckHooks(want bool) error {
	if err := RootCgroupClean(); err != nil {
		return err
	}
	out, err := exec.Command("bpftool", "cgroup", "show", n.Cgroups.V2).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bpftool cgroup show %s: %v: %s", n.Cgroups.V2, err, out)
	}
	has := strings.Contains(string(out), "connect4")
	if has != want {
		return fmt.Errorf("socklb's hooks on %s: %v, want %v:\n%s", n.Cgroups.V2, has, want, out)
	}
	return nil
}

// StartKubeProxy runs the real kube-proxy v1.37.2 in iptables mode, the
// control of the conformance run, on this node's network namespace. The
// conntrack flags at 0 leave the machine-wide conntrack table size alone.
func (n *Node) StartKubeProxy() (*testkit.Proc, error) {
	dir := filepath.Join(n.Dir, "kube-proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, err := testkit.StartProc("kube-proxy", filepath.Join(dir, "kube-proxy.log"), filepath.Join(n.Tools, "kube-proxy"),
		"--kubeconfig="+n.CP.AdminKubeconfig,
		"--proxy-mode=iptables",
		"--hostname-override="+NodeName,
		"--cluster-cidr="+PodCIDR,
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
func (n *Node) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(n.Tools, "kubectl"), append([]string{"--kubeconfig", n.CP.AdminKubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
