package servicemap

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/model"
)

// RemoteNodeAddresses lists where the other nodes of the cluster serve
// NodePorts: the datapath looks a socket's destination up in the wildcard
// NodePort frontends (0.0.0.0 or :: with the nodePort) when it is one of
// these, so a connection to another node's address:nodePort goes straight
// to an endpoint instead of through that node, as Cilium's socket LB does
// for remote-node addresses.
//
// It is every InternalIP and ExternalIP in the Node objects other than
// this node's, kept when kube-proxy on that node would serve NodePorts on
// it, assuming every node runs with this node's --nodeport-addresses:
// the CIDRs filter each family on its own (a family without a CIDR is not
// filtered), and the keyword primary means that node's own primary
// address of each family (its first InternalIP, else ExternalIP: what
// kube-proxy there reads from its Node object). Addresses no socket
// connects to as a node address (link-local, multicast, unspecified,
// broadcast, zoned) are left out, and loopback: a NodePort on another
// node's 127.0.0.1 is this node's own localhost NodePort (otherNodeAddrs
// decides this, for the externalIP rule too). So is any address that is
// also one of this node's (its interfaces, its Node object): a VIP that
// moved here is served by this node's own NodePort frontends, never sent
// to another node's endpoints. The result is sorted and free of
// duplicates.
//
// An unparsable address is a model.Problem naming its Node; the Node's
// other addresses are still used.
func RemoteNodeAddresses(in model.Input) ([]netip.Addr, []model.Problem) {
	own := ownAddresses(in)
	var out []netip.Addr
	var problems []model.Problem
	bad := func(node *corev1.Node, i int, na corev1.NodeAddress) {
		problems = append(problems, model.Problem{Kind: model.KindNode, Object: nnOf("", node.Name),
			Reason: fmt.Sprintf("status.addresses[%d] (%s) %q is not an IP address; this node's connections to that node's NodePorts are not translated for it, fix the Node's address", i, na.Type, na.Address)})
	}
	// Each node's filter is made once, not per address: under primary it
	// holds that node's own primary addresses.
	var filterOf *corev1.Node
	var filter []netip.Prefix
	for node, a := range otherNodeAddrs(in, bad) {
		if node != filterOf {
			filterOf, filter = node, in.NodePortAddresses
			if in.NodePortPrimary {
				filter = append(slices.Clip(filter), primaryPrefixes(node)...)
			}
		}
		if !nodePortFilterAllows(filter, a) {
			continue
		}
		if _, mine := slices.BinarySearchFunc(own, a, netip.Addr.Compare); mine {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), sortProblems(problems)
}
