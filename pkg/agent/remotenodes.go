package agent

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// NodeAddressSetter is the datapath's side of NodePorts: a destination
// that is one of this node's NodePort addresses (local,
// servicemap.NodePortAddresses) or another node's (remote,
// servicemap.RemoteNodeAddresses) is looked up in the NodePort frontends,
// one per port at the unspecified address. The agent hands the addresses
// over when its Datapath has this method.
type NodeAddressSetter interface {
	SetNodeAddresses(local, remote []netip.Addr) error
}

var _ NodeAddressSetter = (*datapath.Datapath)(nil)

// remoteNodes is what the agent knows of the NodePort addresses, this
// node's and the other nodes': computed again only when the Nodes or this
// node's own addresses changed (a 5000-node cluster's Nodes are read then,
// not at every Service change), and handed to the datapath when they
// differ from what it holds.
type remoteNodes struct {
	computed bool
	local    []netip.Addr // this node's interface addresses they were computed with
	own      []netip.Addr // this node's NodePort addresses
	addrs    []netip.Addr // the other nodes'
	problems []model.Problem
	// setOwn and set are what the datapath holds; valid while setOK.
	setOwn, set []netip.Addr
	setOK       bool
}

// refreshRemoteNodes computes the remote node addresses from in's node
// facts and every Node (which nodes lists only then) when force is set or
// this node's interface addresses changed since the last time.
func (a *Agent) refreshRemoteNodes(in model.Input, nodes func() []*corev1.Node, force bool) {
	r := &a.remote
	if !force && r.computed && slices.Equal(r.local, in.LocalAddresses) {
		return
	}
	in.Nodes = nodes()
	r.addrs, r.problems = servicemap.RemoteNodeAddresses(in)
	r.own = servicemap.NodePortAddresses(in)
	r.local, r.computed = in.LocalAddresses, true
}

// withRemoteProblems adds the last computation's problems to a build's:
// they stay reported (and counted in socklb_unusable_objects) between
// computations.
func (a *Agent) withRemoteProblems(problems []model.Problem) []model.Problem {
	if len(a.remote.problems) == 0 {
		return problems
	}
	return append(slices.Clip(problems), a.remote.problems...)
}

// setNodeAddresses hands the addresses to the datapath when it does not
// hold them yet, and reports whether it holds them now. A failure is
// retried with the sync's backoff. The sync calls it before it programs
// the frontends, so a NodePort is reached at its addresses as soon as it
// exists.
func (a *Agent) setNodeAddresses() bool {
	r := &a.remote
	setter, ok := a.cfg.Datapath.(NodeAddressSetter)
	if !ok || !r.computed || r.setOK && slices.Equal(r.set, r.addrs) && slices.Equal(r.setOwn, r.own) {
		return true
	}
	if err := setter.SetNodeAddresses(r.own, r.addrs); err != nil {
		r.setOK = false
		a.log.Error("NodePort addresses not programmed; NodePorts may not be served on this node's new addresses, and this node's connections to other nodes' NodePorts go through them", "err", err)
		return false
	}
	r.setOwn, r.set, r.setOK = r.own, r.addrs, true
	a.log.Info("NodePort addresses programmed", "this_node", len(r.own), "other_nodes", len(r.addrs))
	return true
}
