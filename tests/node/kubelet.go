package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/socklb/socklb/internal/testkit"
)

// kubeletConfig: what this host needs (cgroup v1/v2 hybrid, no swap
// accounting) and nothing else. Its root-dir and containerd's root are on
// the node's ext4 disk, which cadvisor measures: ephemeral-storage is
// real capacity, and local storage isolation (evictions for
// ephemeral-storage limits) works as on a real node. The kubelet's API (exec, logs, port-forward)
// serves the API server only, inside the node's network namespace.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{{cgroup}}
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://{{socket}}
address: {{nodeip}}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
clusterDomain: cluster.local
clusterDNS: ["10.96.0.10"]
resolvConf: {{dir}}/resolv.conf
podLogsDir: {{dir}}/pod-logs
failSwapOn: false
localStorageCapacityIsolation: true
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
  imagefs.inodesFree: "1%"
serializeImagePulls: false
registerNode: true
protectKernelDefaults: false
`

// StartKubelet starts kubelet v1.37.2 on containerd's socket, registering
// node cfg.Spec with its underlay address, its pods under cfg.CgroupRoot.
// Its logs and configuration are in the node's directory, its root on the
// node's disk.
func StartKubelet(cfg *NodeConfig, socket string) (*testkit.Proc, error) {
	dir := filepath.Join(cfg.Dir, "kubelet")
	if err := os.MkdirAll(filepath.Join(dir, "pod-logs"), 0o755); err != nil {
		return nil, err
	}
	// Pods' resolv.conf comes from clusterDNS; the node's own resolver is
	// unreachable from here and must not leak into pods.
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return nil, err
	}
	c := strings.NewReplacer("{{cgroup}}", strings.TrimPrefix(cfg.CgroupRoot, "/"), "{{socket}}", socket, "{{nodeip}}", cfg.Spec.IP, "{{dir}}", dir).Replace(kubeletConfig)
	cfgPath := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(c), 0o644); err != nil {
		return nil, err
	}
	p, err := testkit.StartProc("kubelet", filepath.Join(dir, "kubelet.log"), filepath.Join(cfg.Tools, "kubelet"),
		"--config="+cfgPath,
		"--kubeconfig="+cfg.Kubeconfig,
		"--root-dir="+filepath.Join(cfg.Disk(), "kubelet"),
		"--hostname-override="+cfg.Spec.Name,
		"--node-ip="+cfg.Spec.IP,
		"--node-labels=topology.kubernetes.io/zone="+Zone(cfg.Spec.Index),
		"--v=2",
	)
	if err != nil {
		return nil, fmt.Errorf("starting kubelet: %w", err)
	}
	return p, nil
}
