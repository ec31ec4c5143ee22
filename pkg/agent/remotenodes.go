package agent

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// RemoteNodeAddressSetter is the datapath's side of connections to other
// nodes' NodePorts: a socket that dials one of these addresses is looked
// up in the wildcard NodePort frontends (servicemap.RemoteNodeAddresses).
// The agent hands the addresses over when its Datapath has this method.
type RemoteNodeAddressSetter interface {
	SetRemoteNodeAddresses([]netip.Addr) error
}

var _ RemoteNodeAddressSetter = (*datapath.Datapath)(nil)

// remoteNodes is what the agent knows of the other nodes' NodePort
// addresses: computed again only when the Nodes or this node's own
// addresses changed (a 5000-node cluster's Nodes are read then, not at
// every Service change), and handed to the datapath when they differ from
// what it holds.
type remoteNodes struct {
	computed bool
	local    []netip.Addr // this node's interface addresses they were computed with
	addrs    []netip.Addr
	problems []model.Problem
	// set is what the datapath holds; valid while setOK.
	set   []netip.Addr
	setOK bool
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

// setRemoteNodes hands the addresses to the datapath when it does not hold
// them yet, and reports whether it holds them now. A failure is retried
// with the sync's backoff.
func (a *Agent) setRemoteNodes() bool {
	r := &a.remote
	setter, ok := a.cfg.Datapath.(RemoteNodeAddressSetter)
	if !ok || !r.computed || r.setOK && slices.Equal(r.set, r.addrs) {
		return true
	}
	if err := setter.SetRemoteNodeAddresses(r.addrs); err != nil {
		r.setOK = false
		a.log.Error("other nodes' addresses not programmed; this node's connections to their NodePorts go through them", "err", err)
		return false
	}
	r.set, r.setOK = r.addrs, true
	a.log.Info("other nodes' NodePort addresses programmed", "addresses", len(r.addrs))
	return true
}
