package node

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/socklb/socklb/internal/cluster"
)

// The cluster's addresses. They exist only inside network namespaces the
// harness made: the underlay bridge lives in the harness's own namespace
// (Enter), which has no uplink, so nothing sent anywhere leaves the
// machine. A node reaches the other nodes' pods through them, and
// everything else through the underlay's own address, where it dies.
//
//	underlay  10.0.0.0/24 on bridge ul0 (harness netns)
//	          10.0.0.1     the bridge: the control plane, e2e.test
//	          10.0.0.1<i>  node i's eth0: its InternalIP, NodePorts
//	          10.0.0.100   "outside": no proxy, an external client or LB
//	pods      10.244.<i>.0/24 on node i's cni0 (10.244.<i>.1)
//	external  203.0.113.0/24 routed to node 1 (ExternalIP tests)
const (
	UnderlayBridge = "ul0"
	UnderlayCIDR   = "10.0.0.0/24"
	// ControlPlaneIP is the underlay bridge's address in the harness
	// namespace: the API server's, and every node's default gateway.
	ControlPlaneIP = "10.0.0.1"
	OutsideIP      = "10.0.0.100"
	OutsideNetns   = "outside"
	ClusterCIDR    = "10.244.0.0/16"
	// ExternalCIDR is what the ExternalIP tests use (203.0.113.250): the
	// underlay routes it to node 1, and socklb gets it as
	// --external-ip-cidrs.
	ExternalCIDR = "203.0.113.0/24"
	// Bridge is every node's pod bridge, in the node's own netns.
	Bridge = "cni0"
	// UnderlayDevice is every node's link to the underlay: its InternalIP,
	// where packets from other machines arrive (socklb --devices).
	UnderlayDevice = "eth0"
)

// NodeSpec is one node's name and addresses. Index counts from 1.
type NodeSpec struct {
	Index   int
	Name    string
	IP      string // on the underlay: InternalIP, kubelet's address
	PodCIDR string
	Gateway string // cni0's address: the pods' default gateway
}

// Spec is node i of the cluster (1-based).
func Spec(i int) NodeSpec {
	return NodeSpec{
		Index:   i,
		Name:    fmt.Sprintf("sl-node-%d", i),
		IP:      fmt.Sprintf("10.0.0.%d", 10+i),
		PodCIDR: fmt.Sprintf("10.244.%d.0/24", i),
		Gateway: fmt.Sprintf("10.244.%d.1", i),
	}
}

// Specs are the nodes of an n-node cluster.
func Specs(n int) []NodeSpec {
	var s []NodeSpec
	for i := 1; i <= n; i++ {
		s = append(s, Spec(i))
	}
	return s
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// SetupUnderlay makes the underlay bridge in the harness's namespace,
// with the control plane's address, a route per node's pod CIDR, the
// external CIDR to node 1, and a blackhole for the Service CIDR: a
// ClusterIP no proxy translated dies here. No default route: this
// namespace is the end of every path.
func SetupUnderlay(nodes []NodeSpec) error {
	for _, a := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", UnderlayBridge, "type", "bridge"},
		{"addr", "add", ControlPlaneIP + "/24", "dev", UnderlayBridge},
		{"link", "set", UnderlayBridge, "up"},
		{"route", "add", "blackhole", cluster.ServiceCIDR},
		{"route", "add", ExternalCIDR, "via", nodes[0].IP},
	} {
		if err := ip(a...); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := ip("route", "add", n.PodCIDR, "via", n.IP); err != nil {
			return err
		}
	}
	return writeSysctls(map[string]string{"net/ipv4/ip_forward": "1"})
}

// AttachNode gives the node whose netns holds pid its underlay link: a
// veth pair, one end (ul-<i>) on the bridge here, the other (eth0) in
// the node's namespace, which the node configures itself (SetupNodeNetwork).
func AttachNode(s NodeSpec, pid int) error {
	host := fmt.Sprintf("ul-%d", s.Index)
	for _, a := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", fmt.Sprint(pid)},
		{"link", "set", host, "master", UnderlayBridge},
		{"link", "set", host, "up"},
	} {
		if err := ip(a...); err != nil {
			return err
		}
	}
	return nil
}

// SetupOutside makes the "outside" namespace (ip netns, in the harness's
// private /run/netns): an address on the underlay and a default route
// through it, no socklb hook (its processes are in no node's cgroup) and no
// kube-proxy. It plays a client on another machine or a load balancer.
func SetupOutside() error {
	for _, a := range [][]string{
		{"netns", "add", OutsideNetns},
		{"link", "add", "ul-out", "type", "veth", "peer", "name", "eth0", "netns", OutsideNetns},
		{"link", "set", "ul-out", "master", UnderlayBridge},
		{"link", "set", "ul-out", "up"},
		{"-n", OutsideNetns, "link", "set", "lo", "up"},
		{"-n", OutsideNetns, "addr", "add", OutsideIP + "/24", "dev", "eth0"},
		{"-n", OutsideNetns, "link", "set", "eth0", "up"},
		{"-n", OutsideNetns, "route", "add", "default", "via", ControlPlaneIP},
	} {
		if err := ip(a...); err != nil {
			return err
		}
	}
	return nil
}

// SetupNodeNetwork runs in node s's namespace once eth0 is there: the
// underlay address, the pods' bridge with the gateway address (the CNI
// bridge plugin adopts it), a route per other node's pod CIDR, and a
// default route to the underlay's end (the harness's namespace, no
// uplink): kube-proxy's OUTPUT DNAT, which comes after the route lookup,
// needs a route for ClusterIPs and external IPs, as a real node's default
// route gives it.
func SetupNodeNetwork(s NodeSpec, all []NodeSpec) error {
	for _, a := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", s.IP + "/24", "dev", "eth0"},
		{"link", "set", "eth0", "up"},
		{"link", "add", Bridge, "type", "bridge"},
		{"addr", "add", s.Gateway + "/24", "dev", Bridge},
		{"link", "set", Bridge, "up"},
		{"route", "add", "default", "via", ControlPlaneIP},
	} {
		if err := ip(a...); err != nil {
			return err
		}
	}
	for _, o := range all {
		if o.Index != s.Index {
			if err := ip("route", "add", o.PodCIDR, "via", o.IP); err != nil {
				return err
			}
		}
	}
	return writeSysctls(map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	})
}

func writeSysctls(m map[string]string) error {
	for k, v := range m {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", k, v, err)
		}
	}
	return nil
}

// WriteCNIConfig writes the conflist containerd hands the bridge plugin:
// pod addresses from s's pod CIDR, a default route through the node (as
// every CNI gives pods), no masquerade: a pod's traffic to another node's
// pod keeps its source, and traffic to anywhere else ends in the
// harness's namespace.
func WriteCNIConfig(s NodeSpec, confDir, dataDir string) error {
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
					"ranges":  [][]map[string]string{{{"subnet": s.PodCIDR, "gateway": s.Gateway}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "loopback"},
			// hostPort is the runtime's job, not the Service proxy's.
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
