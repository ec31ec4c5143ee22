package lab

import (
	"net/netip"
)

// The underlay is a namespace holding one bridge, br0, the "switch" every
// machine's eth0 is plugged into. It has no address and no uplink: a frame
// can only ever reach another port of br0.
const (
	underlayBridge = "br0"
	machineDevice  = "eth0" // each machine's (node's, outside's) port on the underlay
)

// underlaySysctls keep the switch silent: with IPv6 off it has no
// link-local address and sends no router or multicast solicitations.
// Bridging IPv6 frames does not need it.
var underlaySysctls = []string{
	"net.ipv6.conf.all.disable_ipv6=1",
	"net.ipv6.conf.default.disable_ipv6=1",
}

// outsideSysctls: the outside machine drops no reply for its source
// (rp_filter off: whether a reply comes back is socklb's business, not the
// kernel's) and ignores ICMP redirects, which a node forwarding a packet
// back out of eth0 may send and which would otherwise change the outside's
// routes for later tests.
var outsideSysctls = append([]string{
	"net.ipv4.conf.all.rp_filter=0",
	"net.ipv4.conf.default.rp_filter=0",
	"net.ipv4.conf.all.accept_redirects=0",
	"net.ipv4.conf.default.accept_redirects=0",
	"net.ipv6.conf.all.accept_redirects=0",
	"net.ipv6.conf.default.accept_redirects=0",
}, noDAD...)

// noDAD turns IPv6 duplicate address detection off for the interfaces a
// machine creates after it: every address here is unique by construction,
// and while an interface's link-local address is tentative (about a second
// after link-up) the machine cannot send a neighbour solicitation for a
// packet it forwards, so the first packet through a fresh node waits for
// the one-second retry: a lost first UDP query, a late first TCP SYN.
var noDAD = []string{
	"net.ipv6.conf.all.accept_dad=0",
	"net.ipv6.conf.default.accept_dad=0",
}

// addUnderlay creates the underlay namespace and its bridge. STP is off
// and the forward delay 0, so a new port forwards at once; multicast
// snooping is off, so IPv6 neighbour solicitations are always flooded.
func (m *MultiNode) addUnderlay() error {
	if err := m.addNetNS(m.Underlay); err != nil {
		return err
	}
	if err := sysctl(m.Underlay, underlaySysctls...); err != nil {
		return err
	}
	return ipSteps(
		[]string{"-n", m.Underlay, "link", "add", underlayBridge, "type", "bridge",
			"stp_state", "0", "forward_delay", "0", "mcast_snooping", "0"},
		[]string{"-n", m.Underlay, "link", "set", underlayBridge, "up"},
	)
}

// attach plugs the namespace netns into the underlay: a veth whose end in
// netns is eth0, with addrs, and whose other end, port, is a port of br0.
// Both ends are created in their namespaces directly, never in the host's.
func (m *MultiNode) attach(netns, port string, addrs ...netip.Prefix) error {
	steps := [][]string{
		{"-n", netns, "link", "add", machineDevice, "type", "veth", "peer", "name", port, "netns", m.Underlay},
		{"-n", m.Underlay, "link", "set", port, "master", underlayBridge, "up"},
	}
	for _, a := range addrs {
		steps = append(steps, addrAdd(netns, a, machineDevice))
	}
	steps = append(steps, []string{"-n", netns, "link", "set", machineDevice, "up"})
	return ipSteps(steps...)
}

// addOutside creates the outside machine: eth0 on the underlay and, until
// RouteVia adds some, no route beyond it.
func (m *MultiNode) addOutside() (*Client, error) {
	c := &Client{Name: "out", NetNS: m.prefix + "-out", IP: OutsideIPv4}
	addrs := []netip.Prefix{netip.PrefixFrom(OutsideIPv4, UnderlayPrefix.Bits())}
	if m.cfg.IPv6 {
		c.IPv6 = OutsideIPv6
		addrs = append(addrs, netip.PrefixFrom(OutsideIPv6, UnderlayPrefixV6.Bits()))
	}
	if err := m.addNetNS(c.NetNS); err != nil {
		return nil, err
	}
	if err := sysctl(c.NetNS, outsideSysctls...); err != nil {
		return nil, err
	}
	if err := m.attach(c.NetNS, "vout", addrs...); err != nil {
		return nil, err
	}
	return c, nil
}

// addrAdd is the ip command that puts a on dev in netns. IPv6 addresses
// skip duplicate address detection (nodad), in pods too, where noDAD is
// not set: a tentative address would fail the first connections.
func addrAdd(netns string, a netip.Prefix, dev string) []string {
	s := []string{"-n", netns, "addr", "add", a.String(), "dev", dev}
	if a.Addr().Is6() {
		s = append(s, "nodad")
	}
	return s
}

// ipSteps runs ip once per step, stopping at the first error.
func ipSteps(steps ...[]string) error {
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}
