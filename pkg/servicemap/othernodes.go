package servicemap

import (
	"iter"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/model"
)

// otherNodeAddrs yields, with its Node, each address of the Nodes other
// than this one that counts as a node's address: every InternalIP and
// ExternalIP, unmapped, but those no socket dials as a node's
// (usableNodeAddr) and loopback (another node's 127.0.0.1 is this node's
// own). It is the one place that decides which of the other Nodes'
// addresses count, both for the externalIPs this node may capture
// (PeerAddresses) and for where the others serve NodePorts
// (RemoteNodeAddresses), so the two cannot drift apart.
//
// An address that does not parse is handed to bad, when it is set, with
// its index in the Node's status.addresses; it is not yielded.
func otherNodeAddrs(in model.Input, bad func(node *corev1.Node, i int, na corev1.NodeAddress)) iter.Seq2[*corev1.Node, netip.Addr] {
	return func(yield func(*corev1.Node, netip.Addr) bool) {
		this := in.ThisNode()
		for _, node := range in.Nodes {
			if node == nil || node == this || this != nil && node.Name == this.Name {
				continue
			}
			for i, na := range node.Status.Addresses {
				if na.Type != corev1.NodeInternalIP && na.Type != corev1.NodeExternalIP {
					continue
				}
				a, err := netip.ParseAddr(na.Address)
				if err != nil {
					if bad != nil {
						bad(node, i, na)
					}
					continue
				}
				if a = a.Unmap(); !usableNodeAddr(a) || a.IsLoopback() {
					continue
				}
				if !yield(node, a) {
					return
				}
			}
		}
	}
}
