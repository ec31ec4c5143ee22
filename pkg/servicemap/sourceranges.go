package servicemap

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"

	"github.com/socklb/socklb/pkg/model"
)

// lbSources is one Service's spec.loadBalancerSourceRanges, split by family
// as kube-proxy's per-family proxiers see them.
type lbSources struct {
	v4, v6 []netip.Prefix
	// closed4 and closed6: the family's load-balancer IPs are not served
	// at all (see sourceRanges).
	closed4, closed6 bool
}

func (s lbSources) of(is6 bool) (ranges []netip.Prefix, closed bool) {
	if is6 {
		return s.v6, s.closed6
	}
	return s.v4, s.closed4
}

// sourceRanges reads spec.loadBalancerSourceRanges as kube-proxy does
// (newBaseServiceInfo in pkg/proxy/serviceport.go, with MapCIDRsByIPFamily
// in pkg/proxy/util): the field only (the
// service.beta.kubernetes.io/load-balancer-source-ranges annotation is the
// cloud providers' business; kube-proxy ignores it), each entry trimmed of
// whitespace (the API server's validation lets padding through), parsed
// sloppily (an IPv4 part may have leading zeros, as the API server still
// accepts for stored objects), an empty entry skipped silently, a
// malformed one skipped with a model.Problem; what parses goes to its own
// family only. The result is masked, sorted and deduplicated.
//
// kube-proxy builds no firewall for a family that ends up with no range,
// so its load-balancer IPs accept every source. For a family with no range
// because the Service simply gives none of that family (a dual-stack
// Service restricted on IPv4 only), socklb does the same. But when some
// entry could not be parsed, socklb cannot know which family it was meant
// for, and opening that family to every source would silently undo a
// restriction the author asked for: a family left with no range then gets
// closed set, and its load-balancer IPs are not served at all (their
// traffic is left alone, so nothing on this node answers it), with a
// problem that says so. Only a manifests directory can carry such an
// entry: the API server refuses malformed ranges.
func (b *builder) sourceRanges(nn types.NamespacedName, spec *corev1.ServiceSpec) lbSources {
	var out lbSources
	malformed := false
	for i, raw := range spec.LoadBalancerSourceRanges {
		s := strings.TrimSpace(raw)
		if s == "" {
			continue
		}
		p, ok := parseSourceRange(s)
		if !ok {
			b.problem(model.KindService, nn, "spec.loadBalancerSourceRanges[%d] %q is not a CIDR (such as 203.0.113.0/24 or 2001:db8::/64); it is ignored, fix or remove it", i, raw)
			malformed = true
			continue
		}
		if p.Addr().Is6() {
			out.v6 = append(out.v6, p)
		} else {
			out.v4 = append(out.v4, p)
		}
	}
	out.v4, out.v6 = sortPrefixes(out.v4), sortPrefixes(out.v6)
	out.closed4 = malformed && len(out.v4) == 0
	out.closed6 = malformed && len(out.v6) == 0
	return out
}

// parseSourceRange is net.ParseCIDR with leading zeros allowed
// (netutils.ParseCIDRSloppy, as kube-proxy parses), made a masked
// netip.Prefix. An IPv4-mapped IPv6 range is the IPv4 range it maps, as
// kube-proxy files it under IPv4; like kube-proxy, the family is decided
// after masking, so ::ffff:0.0.0.0/80 is the IPv6 range ::/80.
func parseSourceRange(s string) (netip.Prefix, bool) {
	_, n, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if !ok || bits == 0 {
		return netip.Prefix{}, false
	}
	switch {
	case bits == 32:
		a = a.Unmap()
	case a.Is4In6():
		// n.IP is already masked, so a mapped address here means a
		// prefix of at least 96 bits: inside the mapped space.
		a, ones = a.Unmap(), ones-96
	}
	return netip.PrefixFrom(a, ones).Masked(), true
}

// allowFromNode is kube-proxy's "allowFromNode" rule (the KUBE-FW chain in
// pkg/proxy/iptables/proxier.go, the firewall set in nftables mode): when a
// range holds this node's primary address of the family, each
// load-balancer IP of the family is allowed as a source too, because a VIP
// that is also a local address of the node (an IP route rule, a VIP on an
// interface) makes the node's own connections to it leave with the VIP as
// their source.
func allowFromNode(ranges []netip.Prefix, lbIPs, primary []netip.Addr) []netip.Prefix {
	nodeAllowed := slices.ContainsFunc(primary, func(a netip.Addr) bool {
		return slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Contains(a) })
	})
	if !nodeAllowed {
		return ranges
	}
	out := slices.Clone(ranges)
	for _, a := range lbIPs {
		if len(ranges) > 0 && a.Is6() == ranges[0].Addr().Is6() {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return sortPrefixes(out)
}

func sortPrefixes(ps []netip.Prefix) []netip.Prefix {
	if len(ps) == 0 {
		return nil
	}
	slices.SortFunc(ps, netip.Prefix.Compare)
	return slices.Compact(ps)
}
