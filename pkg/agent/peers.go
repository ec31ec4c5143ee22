package agent

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// peers is the other Nodes' addresses as servicemap reads them
// (model.Input.PeerAddresses: externalIPs this node may capture), kept
// between syncs: in a 5 000-node cluster they are 10 000 addresses, which a
// Service change must neither list nor compute again. Only a change of the
// other Nodes (source.Changes.RemoteNodes) or a full rebuild makes them
// again.
type peers struct {
	computed bool
	set      model.AddrSet
}

// withPeers adds the other Nodes' addresses to in, computed again from
// nodes (listed only then) when changed is set or they never were.
func (a *Agent) withPeers(in model.Input, nodes func() []*corev1.Node, changed bool) model.Input {
	p := &a.peers
	if changed || !p.computed {
		all := in
		all.Nodes = nodes()
		p.set, p.computed = servicemap.PeerAddresses(all), true
	}
	in.PeerAddresses = p.set
	return in
}

// listed hands nodes already read (a full snapshot's) to what would
// otherwise list them.
func listed(nodes []*corev1.Node) func() []*corev1.Node {
	return func() []*corev1.Node { return nodes }
}
