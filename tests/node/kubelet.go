package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/socklb/socklb/internal/testkit"
)

// NodeName is the one node's name.
const NodeName = "socklb-node"

// kubeletConfig: what this host needs (cgroup v1/v2 hybrid, no swap
// accounting, an overlay whose device cadvisor cannot find for image-fs
// stats) and nothing else. The kubelet's API (exec, logs, port-forward)
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
localStorageCapacityIsolation: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "0%"
  nodefs.inodesFree: "0%"
  imagefs.available: "0%"
  imagefs.inodesFree: "0%"
serializeImagePulls: false
registerNode: true
protectKernelDefaults: false
`

// StartKubelet starts kubelet v1.37.2 on containerd's socket, registering
// the node under NodeName with NodeIP, its pods under cgroup.
func StartKubelet(tools, dir, kubeconfig, socket, cgroup string) (*testkit.Proc, error) {
	if err := os.MkdirAll(filepath.Join(dir, "pod-logs"), 0o755); err != nil {
		return nil, err
	}
	// Pods' resolv.conf comes from clusterDNS; the node's own resolver is
	// unreachable from here and must not leak into pods.
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return nil, err
	}
	cfg := strings.NewReplacer("{{cgroup}}", cgroup, "{{socket}}", socket, "{{nodeip}}", NodeIP, "{{dir}}", dir).Replace(kubeletConfig)
	cfgPath := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	p, err := testkit.StartProc("kubelet", filepath.Join(dir, "kubelet.log"), filepath.Join(tools, "kubelet"),
		"--config="+cfgPath,
		"--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(dir, "root"),
		"--hostname-override="+NodeName,
		"--node-ip="+NodeIP,
		"--v=2",
	)
	if err != nil {
		return nil, fmt.Errorf("starting kubelet: %w", err)
	}
	return p, nil
}
