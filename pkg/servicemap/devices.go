package servicemap

import (
	"net/netip"

	"github.com/socklb/socklb/pkg/model"
)

// NodePortAddresses is where this node serves NodePorts (its interface and
// Node object addresses through --nodeport-addresses, as Build uses them):
// the agent attaches the per-packet path to the devices that carry them,
// and SNATs to them.
func NodePortAddresses(in model.Input) []netip.Addr {
	b := &builder{}
	return b.nodePortAddresses(in)
}
