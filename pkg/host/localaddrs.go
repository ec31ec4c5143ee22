package host

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// LocalAddresses lists the addresses of this network namespace's
// interfaces: with the Node object's addresses, where NodePorts answer.
func LocalAddresses() ([]netip.Addr, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing interface addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}
