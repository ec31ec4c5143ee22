package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Node is one machine of a multi-node lab: a namespace with eth0 on the
// underlay, forwarding on, a route to every other node's pod CIDR through
// that node, and its pods behind veths. It has no default route.
type Node struct {
	Index     int          // i, 1-based
	Name      string       // "n<i>"
	NetNS     string       // sl-<pid>-<n>-n<i>
	Device    Device       // eth0: the device an agent's tc programs go on
	IP        netip.Addr   // 10.250.0.<10+i>, on eth0
	IPv6      netip.Addr   // fd00:250::<10+i>; zero without IPv6
	PodCIDR   netip.Prefix // 10.244.<i>.0/24
	PodCIDRv6 netip.Prefix // fd00:244:<i>::/64; zero without IPv6
	Pods      []*Pod       // pod j is Pods[j-1], named "n<i>-p<j>"
}

// Device is a node's interface on the underlay, as seen inside the node's
// namespace.
type Device struct {
	Name  string // "eth0"
	Index int    // ifindex inside the node's namespace
	MAC   net.HardwareAddr
	IP    netip.Prefix // 10.250.0.<10+i>/24
	IPv6  netip.Prefix // fd00:250::<10+i>/64; zero without IPv6
}

// nodeSysctls make a node a router that forwards whatever the tests send
// through it: forwarding on (IPv4 and IPv6), reverse-path filtering off
// (test traffic is often asymmetric: in by one node, back by another) and
// no ICMP redirects sent or taken (a NodePort packet forwarded back out of
// eth0 would otherwise teach the outside a shortcut), and no IPv6 duplicate
// address detection (see noDAD).
var nodeSysctls = append([]string{
	"net.ipv4.ip_forward=1",
	"net.ipv4.conf.all.forwarding=1",
	"net.ipv6.conf.all.forwarding=1",
	"net.ipv4.conf.all.rp_filter=0",
	"net.ipv4.conf.default.rp_filter=0",
	"net.ipv4.conf.all.send_redirects=0",
	"net.ipv4.conf.default.send_redirects=0",
	"net.ipv4.conf.all.accept_redirects=0",
	"net.ipv4.conf.default.accept_redirects=0",
	"net.ipv6.conf.all.accept_redirects=0",
	"net.ipv6.conf.default.accept_redirects=0",
}, noDAD...)

// addNode creates node i. The sysctls are set before any interface exists,
// so eth0 and the pod veths inherit the "default" values.
func (m *MultiNode) addNode(i int) (*Node, error) {
	n := &Node{
		Index:   i,
		Name:    fmt.Sprintf("n%d", i),
		NetNS:   fmt.Sprintf("%s-n%d", m.prefix, i),
		IP:      nodeIPv4(i),
		PodCIDR: podCIDRv4(i),
	}
	n.Device = Device{Name: machineDevice, IP: netip.PrefixFrom(n.IP, UnderlayPrefix.Bits())}
	addrs := []netip.Prefix{n.Device.IP}
	if m.cfg.IPv6 {
		n.IPv6, n.PodCIDRv6 = nodeIPv6(i), podCIDRv6(i)
		n.Device.IPv6 = netip.PrefixFrom(n.IPv6, UnderlayPrefixV6.Bits())
		addrs = append(addrs, n.Device.IPv6)
	}
	if err := m.addNetNS(n.NetNS); err != nil {
		return nil, err
	}
	if err := sysctl(n.NetNS, nodeSysctls...); err != nil {
		return nil, err
	}
	if err := m.attach(n.NetNS, fmt.Sprintf("vn%d", i), addrs...); err != nil {
		return nil, err
	}
	var routes [][]string
	for k := 1; k <= m.cfg.Nodes; k++ {
		if k == i {
			continue
		}
		routes = append(routes, routeVia(n.NetNS, podCIDRv4(k), nodeIPv4(k)))
		if m.cfg.IPv6 {
			routes = append(routes, routeVia(n.NetNS, podCIDRv6(k), nodeIPv6(k)))
		}
	}
	if err := ipSteps(routes...); err != nil {
		return nil, err
	}
	var err error
	n.Device.Index, n.Device.MAC, err = linkInfo(n.NetNS, machineDevice)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// routeVia is the ip command that routes prefix through gw on the underlay.
// "replace", so that pointing a prefix at another node moves it.
func routeVia(netns string, prefix netip.Prefix, gw netip.Addr) []string {
	return []string{"-n", netns, "route", "replace", prefix.String(), "via", gw.String(), "dev", machineDevice}
}

// linkInfo reads a link's ifindex and MAC inside the named namespace.
func linkInfo(netnsName, dev string) (int, net.HardwareAddr, error) {
	ns, err := netns.GetFromName(netnsName)
	if err != nil {
		return 0, nil, fmt.Errorf("netns %s: %w", netnsName, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return 0, nil, fmt.Errorf("netlink in %s: %w", netnsName, err)
	}
	defer h.Close()
	l, err := h.LinkByName(dev)
	if err != nil {
		return 0, nil, fmt.Errorf("link %s in %s: %w", dev, netnsName, err)
	}
	return l.Attrs().Index, l.Attrs().HardwareAddr, nil
}

// NetNSPath is the node namespace's file, for nsenter --net= or setns(2).
func (n *Node) NetNSPath() string { return NetNSPath(n.NetNS) }

// Command prepares name with args to run inside the node's network
// namespace, keeping the caller's mount namespace (see NetNSCommand): the
// way to run a socklb agent on this node. Pass it to testkit.StartProcCmd
// to have it killed with the test.
func (n *Node) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return NetNSCommand(ctx, n.NetNS, name, args...)
}

// Client runs labclient on the node itself (host-network sockets), with
// the node's underlay addresses as its own.
func (n *Node) Client() *Client {
	return &Client{Name: n.Name, NetNS: n.NetNS, IP: n.IP, IPv6: n.IPv6}
}
