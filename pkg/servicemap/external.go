package servicemap

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// externalIPs returns spec.externalIPs usable as frontends: of a family the
// Service has a cluster IP for (kube-proxy's per-family proxiers drop the
// others the same way), deduplicated. Like kube-proxy, the Service's type
// does not matter: a ClusterIP Service may have externalIPs.
func (b *builder) externalIPs(nn types.NamespacedName, spec *corev1.ServiceSpec, vips []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for i, s := range spec.ExternalIPs {
		field := fmt.Sprintf("spec.externalIPs[%d]", i)
		a, ok := b.frontendAddr(nn, field, s)
		if !ok {
			continue
		}
		if !hasFamily(vips, a) {
			b.problem(model.KindService, nn, "%s %q is %s but the Service has no %s cluster IP; it is ignored", field, s, familyName(a.Is6()), familyName(a.Is6()))
			continue
		}
		if !b.externalIPAllowed(a) {
			b.problem(model.KindService, nn, "%s %q %s: it is not an address of this node or of another Node and not inside --external-ip-cidrs; "+
				"connections to it are left alone (CVE-2020-8554: any Service author could otherwise capture every connection of the node to that address). "+
				"If this node must capture it, add it to --external-ip-cidrs", field, s, RefusedExternalIP)
			continue
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// loadBalancerIPs returns the status.loadBalancer.ingress IPs kube-proxy
// would capture (newBaseServiceInfo in pkg/proxy/serviceport.go): ingress
// entries with an IP, in VIP mode. An ipMode Proxy load balancer (KEP-1860)
// delivers to the node or pod itself, so capturing its IP would bypass the
// load balancer's own processing (TLS, PROXY protocol): the node's clients
// must really go there. An IP of a family the Service does not serve is
// skipped without a report, as kube-proxy does: a load balancer may
// legitimately publish both families for a single-stack Service.
func (b *builder) loadBalancerIPs(nn types.NamespacedName, status *corev1.ServiceStatus, vips []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for i, ing := range status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue // hostname-only: nothing to match at connect()
		}
		field := fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i)
		if m := ing.IPMode; m != nil && *m != corev1.LoadBalancerIPModeVIP {
			if *m != corev1.LoadBalancerIPModeProxy {
				b.problem(model.KindService, nn, "status.loadBalancer.ingress[%d].ipMode %q is not VIP or Proxy; %s is not captured, as kube-proxy captures only VIP mode", i, *m, ing.IP)
			}
			continue
		}
		a, ok := b.frontendAddr(nn, field, ing.IP)
		if !ok || !hasFamily(vips, a) || slices.Contains(out, a) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// frontendAddr parses an externalIP or load-balancer IP. The API server
// refuses the same special addresses as for cluster IPs; a manifests
// directory bypasses it, and at the socket layer a loopback or multicast
// frontend would hijack the node's own traffic.
func (b *builder) frontendAddr(nn types.NamespacedName, field, s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		b.problem(model.KindService, nn, "%s %q is not an IP address; it is ignored", field, s)
		return netip.Addr{}, false
	}
	if a.Zone() != "" {
		b.problem(model.KindService, nn, "%s %q has an IPv6 zone; it is ignored", field, s)
		return netip.Addr{}, false
	}
	a = a.Unmap()
	why := specialAddr(a)
	if why == "" && a.IsMulticast() {
		why = "multicast"
	}
	if why != "" {
		b.problem(model.KindService, nn, "%s %q is %s; it is ignored", field, s, why)
		return netip.Addr{}, false
	}
	return a, true
}

// RefusedExternalIP is the phrase every refused externalIP's model.Problem
// carries, so the agent can count them apart from other bad input.
const RefusedExternalIP = "is refused"

// externalIPAllowed is Cilium's rule for externalIPs at the socket layer
// (an externalIP is translated only when it is an address of the node),
// widened to the other Nodes' addresses and the operator's allowlist.
// Another node's address is no wider an opening than this node's own: that
// node captures the externalIP for every packet that reaches it (its
// per-packet path), so translating it here only saves the hop, as
// kube-proxy's OUTPUT chain would. LoadBalancer ingress IPs are not
// checked: only a controller with access to the status subresource writes
// them.
func (b *builder) externalIPAllowed(a netip.Addr) bool {
	if _, own := slices.BinarySearchFunc(b.ownAddrs, a, netip.Addr.Compare); own || b.peerAddrs.Contains(a) {
		return true
	}
	return slices.ContainsFunc(b.extCIDRs, func(p netip.Prefix) bool { return p.Contains(a) })
}

// PeerAddresses is the other Nodes' addresses (otherNodeAddrs) in every
// Node of in: what model.Input.PeerAddresses holds. It reads and hashes
// every Node's addresses, so call it when the Nodes changed, not with
// every Service change.
func PeerAddresses(in model.Input) model.AddrSet {
	var out []netip.Addr
	for _, a := range otherNodeAddrs(in, nil) {
		out = append(out, a)
	}
	return model.NewAddrSet(out)
}

// ownAddresses is every address of this node: its interfaces and its Node
// object's InternalIP and ExternalIP addresses (a cloud ExternalIP sits on
// no interface but is the node's all the same), without the NodePort filter.
// nodePortAddresses reports the unparseable ones.
func ownAddresses(in model.Input) []netip.Addr {
	out := slices.Clone(in.LocalAddresses)
	if node := in.ThisNode(); node != nil {
		for _, na := range node.Status.Addresses {
			if na.Type != corev1.NodeInternalIP && na.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(na.Address); err == nil {
				out = append(out, ip)
			}
		}
	}
	for i := range out {
		out[i] = out[i].Unmap()
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func hasFamily(vips []netip.Addr, a netip.Addr) bool {
	return slices.ContainsFunc(vips, func(v netip.Addr) bool { return v.Is4() == a.Is4() })
}
