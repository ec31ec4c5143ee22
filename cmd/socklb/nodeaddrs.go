package main

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// withNodeAddresses adds what servicemap needs for NodePorts and
// externalIPs and the source does not know: this node's interface
// addresses, the --nodeport-addresses filter and the --external-ip-cidrs
// allowlist. Interfaces are read at every snapshot, so a
// new address is picked up with the next API change.
type withNodeAddresses struct {
	source.Source
	filter          []netip.Prefix
	externalIPCIDRs []netip.Prefix
	log             *slog.Logger
}

func (s withNodeAddresses) Snapshot() servicemap.Input {
	in := s.Source.Snapshot()
	addrs, err := datapath.LocalAddresses()
	if err != nil {
		s.log.Warn("NodePorts are served on the Node object's addresses only", "err", err)
	}
	in.LocalAddresses = addrs
	in.NodePortAddresses = s.filter
	in.ExternalIPCIDRs = s.externalIPCIDRs
	return in
}

// parseCIDRs reads a comma separated list of CIDRs (kube-proxy's
// --nodeport-addresses, socklb's --external-ip-cidrs).
func parseCIDRs(flag, v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a CIDR (e.g. 10.0.0.0/8,fd00::/64): %w", flag, f, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
