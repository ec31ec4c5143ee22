package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

// PauseImage is the sandbox image: the name kubelet v1.37.2 and the e2e
// suite expect (test/utils/image/manifest.go).
const PauseImage = "registry.k8s.io/pause:3.10.2"

// Containerd is Debian's containerd with its root, state, socket and
// runc root under one directory of the run.
type Containerd struct {
	Dir    string
	Socket string
	Proc   *testkit.Proc
}

// containerdConfig is CRI's configuration. restrict_oom_score_adj: this
// sandbox's root lacks CAP_SYS_RESOURCE, and runc fails every sandbox when
// CRI asks for oom_score_adj -998.
const containerdConfig = `version = 2
root = "{{root}}/root"
state = "{{dir}}/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{{dir}}/containerd.sock"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{dir}}/cni/net.d"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{dir}}/opt"
`

// StartContainerd writes the configuration and node s's CNI config under
// dir and starts containerd, its images and snapshots under root (the
// node's disk).
func StartContainerd(s NodeSpec, dir, root string) (*Containerd, error) {
	c := &Containerd{Dir: dir, Socket: filepath.Join(dir, "containerd.sock")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := WriteCNIConfig(s, filepath.Join(dir, "cni/net.d"), filepath.Join(dir, "cni/ipam")); err != nil {
		return nil, fmt.Errorf("writing the CNI config: %w", err)
	}
	cfg := strings.NewReplacer("{{dir}}", dir, "{{root}}", root, "{{pause}}", PauseImage).Replace(containerdConfig)
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	var err error
	c.Proc, err = testkit.StartProc("containerd", filepath.Join(dir, "containerd.log"), "containerd", "--config", cfgPath)
	if err != nil {
		return nil, err
	}
	if err := c.Proc.WaitFor("its socket", 60*time.Second, func() error {
		return exec.Command("ctr", "--address", c.Socket, "version").Run()
	}); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Import loads an image tarball (OCI layout or docker archive) into the
// k8s.io namespace, where CRI finds it.
func (c *Containerd) Import(tarball string) error {
	out, err := exec.Command("ctr", "--address", c.Socket, "-n", "k8s.io", "images", "import", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v: %s", tarball, err, out)
	}
	return nil
}

// Stop stops containerd. The shims it started are in the run's cgroup;
// Enter's parent kills what outlives them.
func (c *Containerd) Stop() {
	if c != nil {
		c.Proc.Stop(15 * time.Second)
	}
}
