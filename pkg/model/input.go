package model

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Input is every object servicemap.Build reads: a snapshot of the API (or of the
// manifests directory) and the identity of this node.
type Input struct {
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	// Nodes holds this node's Node object (see ThisNode), and with a whole
	// snapshot every other Node too; servicemap.Build reads this node's
	// alone, the other Nodes reach it as PeerAddresses.
	Nodes    []*corev1.Node
	NodeName string
	// LocalAddresses are this node's interface addresses (found by the
	// agent with netlink); with the Node object's addresses they are where
	// NodePorts are served.
	LocalAddresses []netip.Addr
	// NodePortAddresses is kube-proxy's --nodeport-addresses filter, per
	// family: when it holds prefixes of a family, NodePorts of that family
	// are served only on node addresses inside them, 127.0.0.1 included
	// (see nodePortAddresses). The keywords "localhost" and "all" are
	// prefixes too (127.0.0.0/8 and ::1/128; 0.0.0.0/0 and ::/0), as
	// kube-proxy expands them.
	NodePortAddresses []netip.Prefix
	// ExternalIPCIDRs is the operator's --external-ip-cidrs allowlist: an
	// externalIP is captured when it is an address of this node (as
	// Cilium's socket LB does) or of another Node (PeerAddresses), or
	// falls inside one of these prefixes.
	// Anything else is refused, because whoever may create a Service could
	// otherwise redirect every connection of the node to any address
	// (CVE-2020-8554).
	ExternalIPCIDRs []netip.Prefix
	// NodePortPrimary is the keyword "primary" of --nodeport-addresses:
	// the filter also holds this node's primary IPv4 and IPv6 addresses,
	// taken from its Node object when Build runs (see primaryNodeIPs).
	NodePortPrimary bool
	// PeerAddresses are the other Nodes' addresses, as
	// servicemap.PeerAddresses finds them in every Node: externalIPs this
	// node may capture besides its own. They are a fact handed over like
	// the others rather than read from Nodes, so that a Service change
	// need not list thousands of Nodes: the agent computes them again
	// only when another Node changed, and the set's digest tells
	// servicemap's Tracker whether they did.
	PeerAddresses AddrSet
}

// ThisNode is the Node object named NodeName, or nil: Nodes may hold the
// whole cluster's Nodes, and only this one says where the agent runs.
func (in Input) ThisNode() *corev1.Node {
	if in.NodeName == "" {
		return nil
	}
	for _, node := range in.Nodes {
		if node != nil && node.Name == in.NodeName {
			return node
		}
	}
	return nil
}
