package servicemap

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// nodeInfo is what endpoint selection needs to know about this node: its
// name for internalTrafficPolicy Local and same-node hints, its zone for
// same-zone hints.
type nodeInfo struct {
	name string
	zone string
}

func nodeFromInput(in model.Input) nodeInfo {
	n := nodeInfo{name: in.NodeName}
	if node := in.ThisNode(); node != nil {
		n.zone = node.Labels[corev1.LabelTopologyZone]
	}
	return n
}

// endpoint is one EndpointSlice endpoint reduced to what selection reads.
// port is 0 until the endpoint is resolved against a service port. The
// endpoint's own zone is not kept: kube-proxy routes on hints alone, which
// the EndpointSlice controller derives from zones and trafficDistribution.
type endpoint struct {
	addr     netip.Addr
	port     uint16
	nodeName string

	ready       bool
	serving     bool
	terminating bool

	zoneHints []string // hints.forZones[].name
	nodeHints []string // hints.forNodes[].name
}

func (e endpoint) isLocal(n nodeInfo) bool { return n.name != "" && e.nodeName == n.name }

// replaces reports whether copy e of an ip:port found in several slices
// takes the place of old, the copy kept so far. kube-proxy's rule
// (addEndpoints in pkg/proxy/endpointslicecache.go, `!exists ||
// !terminating`): a copy that is not terminating always replaces, whatever
// its readiness, so a new pod that reuses a terminating pod's IP hides the
// old pod even before it is ready; a terminating copy never replaces.
// kube-proxy leaves the choice among several copies of the same kind to
// map order ("the result is undefined"); socklb makes it deterministic:
// among copies that are not terminating, a ready one beats a not-ready one
// (an endpoint moving between slices is not dropped for a stale copy);
// among terminating ones, a serving one beats one that is not; then the
// local one; then the first in slice-name order.
func (e endpoint) replaces(old endpoint, node nodeInfo) bool {
	if e.terminating != old.terminating {
		return !e.terminating
	}
	if e.terminating && e.serving != old.serving {
		return e.serving
	}
	if !e.terminating && e.ready != old.ready {
		return e.ready
	}
	return e.isLocal(node) && !old.isLocal(node)
}

// slicePort is an EndpointSlice port with the API's defaults applied.
type slicePort struct {
	name  string
	proto Protocol
	port  uint16
}

// parsedSlice is one usable IPv4 or IPv6 EndpointSlice.
type parsedSlice struct {
	is6       bool
	ports     []slicePort
	endpoints []endpoint
}

// indexSlices groups slices by the Service they belong to: the
// kubernetes.io/service-name label, in the slice's own namespace. Slices
// come out in name order so that merging duplicates is deterministic.
func (b *builder) indexSlices(in []*discoveryv1.EndpointSlice) map[types.NamespacedName][]*discoveryv1.EndpointSlice {
	sorted := make([]*discoveryv1.EndpointSlice, 0, len(in))
	for _, s := range in {
		if s != nil {
			sorted = append(sorted, s)
		}
	}
	byName := func(a, b *discoveryv1.EndpointSlice) int {
		return compareNN(nnOf(a.Namespace, a.Name), nnOf(b.Namespace, b.Name))
	}
	// Sources hand out sorted snapshots; checking is linear, sorting is not.
	if !slices.IsSortedFunc(sorted, byName) {
		slices.SortStableFunc(sorted, byName)
	}

	out := make(map[types.NamespacedName][]*discoveryv1.EndpointSlice, len(sorted))
	for _, s := range sorted {
		// kube-proxy's slice informer selects on this label alone
		// (cmd/kube-proxy/app/server.go). A slice's copy of its Service's
		// service-proxy-name label is not read: the Service decides.
		if _, headless := s.Labels[model.LabelHeadless]; headless {
			continue
		}
		svc := s.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			b.unlabelled(s)
			continue
		}
		nn := nnOf(s.Namespace, svc)
		out[nn] = append(out[nn], s)
	}
	return out
}

func (b *builder) unlabelled(s *discoveryv1.EndpointSlice) {
	b.problem(model.KindEndpointSlice, nnOf(s.Namespace, s.Name),
		"has no %q label, so it belongs to no Service and is ignored; label it with the name of its Service", discoveryv1.LabelServiceName)
}

// parseSlices validates the slices of one Service. It runs only for Services
// that are programmed, so slices nobody uses cause no reports.
func (b *builder) parseSlices(in []*discoveryv1.EndpointSlice) []parsedSlice {
	out := make([]parsedSlice, 0, len(in))
	for _, s := range in {
		nn := nnOf(s.Namespace, s.Name)
		var ps parsedSlice
		switch s.AddressType {
		case discoveryv1.AddressTypeIPv4:
		case discoveryv1.AddressTypeIPv6:
			ps.is6 = true
		case discoveryv1.AddressTypeFQDN:
			// kube-proxy ignores FQDN slices: there is no address to connect to.
			continue
		default:
			b.problem(model.KindEndpointSlice, nn, "addressType %q is not IPv4, IPv6 or FQDN; the slice is ignored", s.AddressType)
			continue
		}

		for i, p := range s.Ports {
			// nil name and protocol are what the API server defaults to ""
			// and TCP; only undefaulted objects (manifests) carry them.
			sp := slicePort{proto: TCP}
			if p.Name != nil {
				sp.name = *p.Name
			}
			if p.Protocol != nil {
				proto, ok := parseProtocol(*p.Protocol)
				if !ok {
					// No service port can carry this protocol: the
					// Service's own model.Problem already names it.
					continue
				}
				sp.proto = proto
			}
			switch {
			case p.Port == nil || *p.Port == 0:
				b.problem(model.KindEndpointSlice, nn, "ports[%d] (name %q) has no port number; kube-proxy and socklb cannot use it, set ports[%d].port", i, sp.name, i)
				continue
			case *p.Port < 0 || *p.Port > 65535:
				b.problem(model.KindEndpointSlice, nn, "ports[%d] (name %q) has port number %d; it must be 1-65535 (fix ports[%d].port)", i, sp.name, *p.Port, i)
				continue
			}
			sp.port = uint16(*p.Port)
			ps.ports = append(ps.ports, sp)
		}
		if len(ps.ports) == 0 {
			// Endpoints without a port feed nothing; checking them would
			// only add noise.
			continue
		}

		for i, e := range s.Endpoints {
			ep, ok := b.parseEndpoint(nn, i, e, ps.is6)
			if ok {
				ps.endpoints = append(ps.endpoints, ep)
			}
		}
		out = append(out, ps)
	}
	return out
}

func (b *builder) parseEndpoint(slice types.NamespacedName, i int, e discoveryv1.Endpoint, is6 bool) (endpoint, bool) {
	if len(e.Addresses) == 0 {
		b.problem(model.KindEndpointSlice, slice, "endpoints[%d] has no addresses; it is ignored", i)
		return endpoint{}, false
	}
	// Like kube-proxy, only the first address is used: the API defines no
	// semantics for the others.
	raw := e.Addresses[0]
	a, err := netip.ParseAddr(raw)
	if err != nil {
		b.problem(model.KindEndpointSlice, slice, "endpoints[%d] address %q is not an IP address; it is ignored", i, raw)
		return endpoint{}, false
	}
	if a.Zone() != "" {
		b.problem(model.KindEndpointSlice, slice, "endpoints[%d] address %q has an IPv6 zone, which a pod address cannot have; it is ignored", i, raw)
		return endpoint{}, false
	}
	// kube-proxy (IsIPv6String) files a mapped address under IPv4.
	a = a.Unmap()
	if why := specialAddr(a); why != "" {
		b.problem(model.KindEndpointSlice, slice, "endpoints[%d] address %q is %s, which the API server rejects for an endpoint; it is ignored", i, raw, why)
		return endpoint{}, false
	}
	if a.Is6() != is6 {
		b.problem(model.KindEndpointSlice, slice, "endpoints[%d] address %q is %s but the slice's addressType is %s; it is ignored, put it in an %s slice",
			i, raw, familyName(a.Is6()), familyName(is6), familyName(a.Is6()))
		return endpoint{}, false
	}

	c := e.Conditions
	ep := endpoint{
		addr: a,
		// nil ready and nil serving mean "true" (API docs, and kube-proxy's
		// endpointslicecache); nil terminating means false.
		ready:       c.Ready == nil || *c.Ready,
		serving:     c.Serving == nil || *c.Serving,
		terminating: c.Terminating != nil && *c.Terminating,
	}
	if e.NodeName != nil {
		ep.nodeName = *e.NodeName
	}
	if h := e.Hints; h != nil {
		for _, z := range h.ForZones {
			ep.zoneHints = append(ep.zoneHints, z.Name)
		}
		for _, n := range h.ForNodes {
			ep.nodeHints = append(ep.nodeHints, n.Name)
		}
	}
	return ep, true
}

// candidateEndpoints resolves a service port against the Service's slices of
// one family: every endpoint of every slice port with the same name and
// protocol, keyed by ip:port, so a target port comes from the slice and never
// from spec.targetPort. Of the copies of one ip:port, the one that replaces
// all others is kept (see replaces).
func candidateEndpoints(in []parsedSlice, is6 bool, sp servicePort, node nodeInfo) []endpoint {
	var out []endpoint
	index := map[netip.AddrPort]int{}
	for _, s := range in {
		if s.is6 != is6 {
			continue
		}
		for _, p := range s.ports {
			if p.name != sp.name || p.proto != sp.proto {
				continue
			}
			for _, e := range s.endpoints {
				e.port = p.port
				k := netip.AddrPortFrom(e.addr, e.port)
				i, seen := index[k]
				if !seen {
					index[k] = len(out)
					out = append(out, e)
					continue
				}
				if e.replaces(out[i], node) {
					out[i] = e
				}
			}
		}
	}
	return out
}
