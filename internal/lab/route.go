package lab

import (
	"fmt"
	"net/netip"
)

// RouteVia points prefix (a LoadBalancer IP, an externalIP, a pod CIDR) at
// node: "prefix via <node's underlay address>" in the outside namespace,
// and in each node of alsoOn. It replaces an earlier route for prefix, so
// a test can move a prefix to another node.
//
// A default route (/0) is refused: no machine here gets one, so an address
// nobody routes fails with ENETUNREACH. So is a prefix overlapping the
// underlay, which would take its connected route away.
func (m *MultiNode) RouteVia(prefix netip.Prefix, node int, alsoOn ...int) error {
	n := m.Node(node)
	if n == nil {
		return fmt.Errorf("lab: route %s: no node %d", prefix, node)
	}
	if !prefix.IsValid() || prefix.Bits() == 0 {
		return fmt.Errorf("lab: route %s: want a non-default prefix", prefix)
	}
	prefix = prefix.Masked()
	if prefix.Overlaps(UnderlayPrefix) || prefix.Overlaps(UnderlayPrefixV6) {
		return fmt.Errorf("lab: route %s: overlaps the underlay", prefix)
	}
	gw := n.IP
	if prefix.Addr().Is6() {
		if !m.cfg.IPv6 {
			return fmt.Errorf("lab: route %s: the lab has no IPv6", prefix)
		}
		gw = n.IPv6
	}
	steps := [][]string{routeVia(m.Outside.NetNS, prefix, gw)}
	for _, k := range alsoOn {
		other := m.Node(k)
		if other == nil || k == node {
			return fmt.Errorf("lab: route %s via node %d: cannot add it on node %d", prefix, node, k)
		}
		steps = append(steps, routeVia(other.NetNS, prefix, gw))
	}
	if err := ipSteps(steps...); err != nil {
		return fmt.Errorf("lab: route %s via node %d: %w", prefix, node, err)
	}
	return nil
}
