package lab

import (
	"fmt"
	"net/netip"
)

// The multi-node lab's address plan. Node i (1-based) sits on the underlay
// at host number 10+i, pod j (1-based) of node i at host number 10+j of the
// node's pod CIDR. IPv6 addresses write the same decimal numbers as hex
// digits, so 10.244.2.11 pairs with fd00:244:2::11 and 10.250.0.12 with
// fd00:250::12.
const (
	MaxNodes       = 89  // host numbers 11..99; .100 is the outside machine
	MaxPodsPerNode = 244 // host numbers 11..254
)

var (
	UnderlayPrefix   = netip.MustParsePrefix("10.250.0.0/24")
	UnderlayPrefixV6 = netip.MustParsePrefix("fd00:250::/64")
	OutsideIPv4      = netip.MustParseAddr("10.250.0.100")
	OutsideIPv6      = netip.MustParseAddr("fd00:250::100")
)

// podGatewayV6 is the link-local address every node puts on its pod veths:
// the pods' IPv6 default gateway. IPv6 neighbour discovery answers only for
// addresses on the receiving interface, so the node's underlay address
// cannot serve as the pods' gateway the way it does for IPv4 (ARP answers
// for any local address).
var podGatewayV6 = netip.MustParseAddr("fe80::1")

func nodeIPv4(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 250, 0, byte(10 + i)}) }
func nodeIPv6(i int) netip.Addr { return mustAddr(fmt.Sprintf("fd00:250::%d", 10+i)) }

func podCIDRv4(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)
}
func podCIDRv6(i int) netip.Prefix {
	return netip.PrefixFrom(mustAddr(fmt.Sprintf("fd00:244:%d::", i)), 64)
}

func podIPv4(i, j int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, byte(i), byte(10 + j)}) }
func podIPv6(i, j int) netip.Addr { return mustAddr(fmt.Sprintf("fd00:244:%d::%d", i, 10+j)) }

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
