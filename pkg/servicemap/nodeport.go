package servicemap

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

var ipv4Localhost = netip.AddrFrom4([4]byte{127, 0, 0, 1})

// nodePortAddresses is where this node serves NodePorts: its interface
// addresses (model.Input.LocalAddresses) and its Node object's InternalIP and
// ExternalIP addresses, passed through --nodeport-addresses, sorted and
// deduplicated. The Node object's addresses are added because the agent's
// interface list can lag behind (an interface still coming up), and because
// a cloud ExternalIP, on no interface of the node, reaches the node's
// NodePorts through the provider's NAT anyway: translating it at connect()
// gives the same endpoints without the hairpin.
//
// 127.0.0.1 is always a candidate: kube-proxy's iptables mode serves IPv4
// NodePorts on localhost (it sets route_localnet, issues.k8s.io/90259),
// and software on nodes relies on it. Like kube-proxy, it then obeys the
// filter: kube-proxy turns localhost NodePorts off when the IPv4 part of
// --nodeport-addresses does not cover 127.0.0.0/8 (ContainsIPv4Loopback in
// pkg/proxy/util/nodeport_addresses.go), and so does a filter that does not
// contain 127.0.0.1 here. ::1 never serves NodePorts, as in kube-proxy:
// IPv6 has no route_localnet, so its iptables mode cannot.
func (b *builder) nodePortAddresses(in model.Input) []netip.Addr {
	cands := []netip.Addr{ipv4Localhost}
	cands = append(cands, in.LocalAddresses...)
	if node := in.ThisNode(); node != nil {
		for i, a := range node.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			ip, err := netip.ParseAddr(a.Address)
			if err != nil {
				b.problem(model.KindNode, nnOf("", node.Name), "status.addresses[%d] (%s) %q is not an IP address; NodePorts are not served on it", i, a.Type, a.Address)
				continue
			}
			cands = append(cands, ip)
		}
	}

	filter := in.NodePortAddresses
	if in.NodePortPrimary {
		filter = append(slices.Clip(filter), primaryPrefixes(in.ThisNode())...)
	}
	var out []netip.Addr
	for _, a := range cands {
		a = a.Unmap()
		if usableNodeAddr(a) && nodePortFilterAllows(filter, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// usableNodeAddr leaves out what no socket connects to as a node address: a
// link-local address needs an interface (and IPv6 a zone) to mean anything,
// multicast and broadcast are not unicast destinations, and IPv4 loopback is
// kept while ::1 is not (see nodePortAddresses).
func usableNodeAddr(a netip.Addr) bool {
	switch {
	case !a.IsValid(), a.Zone() != "", a.IsUnspecified(), a.IsLinkLocalUnicast(), a.IsMulticast():
		return false
	case a.Is6() && a.IsLoopback():
		return false
	case a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return false
	}
	return true
}

// nodePortFilterAllows is kube-proxy's --nodeport-addresses, per family
// (NewNodePortAddresses in pkg/proxy/util/nodeport_addresses.go): a family
// with no prefix in the list is not filtered at all, so "10.0.0.0/8" alone
// leaves every IPv6 address in. The keyword "primary" arrives here as the
// prefixes primaryPrefixes made of it.
func nodePortFilterAllows(filter []netip.Prefix, a netip.Addr) bool {
	sameFamily := false
	for _, p := range filter {
		if !p.IsValid() || p.Addr().Is4() != a.Is4() {
			continue
		}
		sameFamily = true
		if p.Contains(a) {
			return true
		}
	}
	return !sameFamily
}

// nodePort validates spec.ports[i].nodePort. Zero is "none": a LoadBalancer
// with allocateLoadBalancerNodePorts false, or a NodePort not yet allocated.
// kube-proxy serves any non-zero nodePort whatever the type; the API server
// refuses one on a ClusterIP Service, so only a manifest can carry it, and
// serving it would open a port the author did not ask for by type.
func (b *builder) nodePort(nn types.NamespacedName, typ corev1.ServiceType, i int, p corev1.ServicePort) uint16 {
	switch {
	case p.NodePort == 0:
		return 0
	case typ != corev1.ServiceTypeNodePort && typ != corev1.ServiceTypeLoadBalancer:
		b.problem(model.KindService, nn, "port %s has nodePort %d but spec.type is not NodePort or LoadBalancer; no NodePort is served, remove spec.ports[%d].nodePort or change the type",
			portLabel(p.Name, p.Port), p.NodePort, i)
		return 0
	case p.NodePort < 1 || p.NodePort > 65535:
		b.problem(model.KindService, nn, "port %s has nodePort %d; it must be 1-65535 (fix spec.ports[%d].nodePort)", portLabel(p.Name, p.Port), p.NodePort, i)
		return 0
	}
	return uint16(p.NodePort)
}

// primaryAddrs is the addresses of primaryPrefixes.
func primaryAddrs(node *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, p := range primaryPrefixes(node) {
		out = append(out, p.Addr())
	}
	return out
}

// primaryPrefixes is kube-proxy's expansion of the keyword "primary"
// (expandNodePortAddressKeywords in cmd/kube-proxy/app/server.go): a /32
// and a /128 for this node's primary IPv4 and IPv6 address. Those are what
// detectNodeIPs finds in the Node object: the first InternalIP, else the
// first ExternalIP, and then the first address of the other family in that
// same order (GetNodeHostIPs in pkg/util/node). A family with no such
// address gets no prefix, and is then not filtered at all, as in
// kube-proxy, which falls back to loopback there and skips it. kube-proxy
// reads the Node once at start and restarts when its addresses change;
// reading it at every Build gives the same result without the restart.
func primaryPrefixes(node *corev1.Node) []netip.Prefix {
	if node == nil {
		return nil
	}
	var all []netip.Addr
	for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		for _, na := range node.Status.Addresses {
			if na.Type != typ {
				continue
			}
			if a, err := netip.ParseAddr(na.Address); err == nil && a.Zone() == "" {
				all = append(all, a.Unmap())
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	primary := []netip.Addr{all[0]}
	if i := slices.IndexFunc(all, func(a netip.Addr) bool { return a.Is4() != all[0].Is4() }); i >= 0 {
		primary = append(primary, all[i])
	}
	var out []netip.Prefix
	for _, a := range primary {
		if !a.IsLoopback() {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}
