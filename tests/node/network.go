package node

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/socklb/socklb/internal/cluster"
)

// The node's addresses. They exist only inside the node's network
// namespace, which has no route anywhere else.
const (
	Bridge  = "cni0"
	PodCIDR = "10.244.0.0/24"
	// NodeIP is the bridge's own address: the node's InternalIP, the API
	// server's address, and the pods' gateway, so the `kubernetes` Service
	// works from pods on-link.
	NodeIP = "10.244.0.1"
)

// SetupBridge makes the pods' bridge with the node's address before the
// first pod (the CNI bridge plugin adopts it: same name, same gateway), and
// the node's route to the Service CIDR.
func SetupBridge() error {
	for _, args := range [][]string{
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", NodeIP + "/24", "dev", Bridge},
		{"link", "set", Bridge, "up"},
		// A node always has a route to the Service CIDR (its default route):
		// kube-proxy's OUTPUT DNAT happens after the route lookup, so without
		// one every hostNetwork pod's connect to a ClusterIP fails with
		// ENETUNREACH under the control. The route stays inside the node's
		// network namespace, which has no way out; socklb never needs it, as
		// it rewrites the address before the lookup.
		{"route", "add", cluster.ServiceCIDR, "dev", Bridge},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	return nil
}

// WriteCNIConfig writes the conflist containerd hands the bridge plugin.
// Pods reach the pod CIDR on-link and get a route to the Service CIDR (kube-proxy, in the
// control run, DNATs in the node's PREROUTING) through the bridge, and no
// default route; no masquerade.
func WriteCNIConfig(confDir, dataDir string) error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "socklb-node",
		"plugins": []any{
			map[string]any{
				"type":        "bridge",
				"bridge":      Bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": dataDir,
					"ranges":  [][]map[string]string{{{"subnet": PodCIDR, "gateway": NodeIP}}},
					// The pod CIDR is on-link already.
					"routes": []map[string]string{{"dst": cluster.ServiceCIDR}},
				},
			},
			map[string]any{"type": "loopback"},
			// hostPort is the runtime's job, not the Service proxy's: without
			// portmap the HostPort conformance test fails under either proxy.
			// Its rules live in the node's own network namespace.
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-socklb-node.conflist"), b, 0o644)
}
