package lab

import (
	"fmt"
	"net/netip"
)

// addPod creates pod j of node n: a namespace joined to the node by a veth
// (eth0 in the pod, vp<j> in the node). The node routes the pod's address
// to vp<j>; the pod's default route leads to the node.
//
// The pod's IPv4 gateway is the node's underlay address, declared on-link:
// a node answers ARP for any of its addresses on any interface, so vp<j>
// needs no address of its own and the node gains no address that an agent
// would take for a node IP. For IPv6 the gateway is fe80::1 on vp<j> (see
// podGatewayV6).
//
// The node's routes to the pod name the node's underlay address as source,
// so connections from the node to its pods come from the node's IP.
func (m *MultiNode) addPod(n *Node, j int) (*Pod, error) {
	p := &Pod{
		Name:  fmt.Sprintf("%s-p%d", n.Name, j),
		Index: j,
		NetNS: fmt.Sprintf("%s-p%d", n.NetNS, j),
		IP:    podIPv4(n.Index, j),
	}
	if m.cfg.IPv6 {
		p.IPv6 = podIPv6(n.Index, j)
	}
	if err := m.addNetNS(p.NetNS); err != nil {
		return nil, err
	}
	vp := fmt.Sprintf("vp%d", j)
	steps := [][]string{
		{"-n", n.NetNS, "link", "add", vp, "type", "veth", "peer", "name", "eth0", "netns", p.NetNS},
		addrAdd(p.NetNS, netip.PrefixFrom(p.IP, 32), "eth0"),
	}
	if m.cfg.IPv6 {
		steps = append(steps,
			addrAdd(p.NetNS, netip.PrefixFrom(p.IPv6, 128), "eth0"),
			addrAdd(n.NetNS, netip.PrefixFrom(podGatewayV6, 64), vp),
		)
	}
	steps = append(steps,
		[]string{"-n", n.NetNS, "link", "set", vp, "up"},
		[]string{"-n", p.NetNS, "link", "set", "eth0", "up"},
		[]string{"-n", n.NetNS, "route", "add", p.IP.String() + "/32", "dev", vp, "src", n.IP.String()},
		[]string{"-n", p.NetNS, "route", "add", "0.0.0.0/0", "via", n.IP.String(), "dev", "eth0", "onlink"},
	)
	if m.cfg.IPv6 {
		steps = append(steps,
			[]string{"-n", n.NetNS, "route", "add", p.IPv6.String() + "/128", "dev", vp, "src", n.IPv6.String()},
			[]string{"-n", p.NetNS, "route", "add", "::/0", "via", podGatewayV6.String(), "dev", "eth0"},
		)
	}
	return p, ipSteps(steps...)
}
