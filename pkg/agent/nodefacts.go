package agent

import "github.com/socklb/socklb/pkg/model"

// withNodeFacts adds to a source's snapshot what servicemap needs about
// this node and no API object holds. The interfaces are read at every
// sync, so a new address is picked up with the next sync: the next API
// change, or the address event itself (Config.AddressEvents).
func (a *Agent) withNodeFacts(in model.Input) model.Input {
	addrs, err := a.cfg.LocalAddresses()
	if err != nil {
		a.log.Warn("NodePorts are served on the Node object's addresses only", "err", err)
	}
	in.LocalAddresses = addrs
	in.NodePortAddresses = a.cfg.NodePortAddresses
	in.NodePortPrimary = a.cfg.NodePortPrimary
	in.ExternalIPCIDRs = a.cfg.ExternalIPCIDRs
	return in
}
