package servicemap

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// Build computes the desired datapath state from a snapshot of the API. It
// never fails as a whole: an object it cannot use is reported as a model.Problem
// and left out, and everything else is still programmed, because one bad
// Service must not take the other Services of the node down with it.
//
// The output depends only on the set of objects, not on their order in in,
// except when two objects share a namespace/name (which an informer never
// produces); then the first Service wins, and slices are merged.
func Build(in model.Input) (State, []model.Problem) {
	b := &builder{
		node: nodeFromInput(in),
	}
	b.nodeAddrs = b.nodePortAddresses(in)
	b.ownAddrs = ownAddresses(in)
	b.peerAddrs = in.PeerAddresses
	b.extCIDRs = in.ExternalIPCIDRs
	b.primary = primaryAddrs(in.ThisNode())
	bySvc := b.indexSlices(in.Slices)

	svcs := make([]*corev1.Service, 0, len(in.Services))
	for _, s := range in.Services {
		if s != nil {
			svcs = append(svcs, s)
		}
	}
	// Processing in name order makes "first claim wins" mean "lexically
	// smallest namespace/name wins" when two Services of one kind collide
	// on a frontend (claimAll orders the kinds).
	byName := func(a, b *corev1.Service) int {
		return compareNN(nnOf(a.Namespace, a.Name), nnOf(b.Namespace, b.Name))
	}
	if !slices.IsSortedFunc(svcs, byName) {
		slices.SortStableFunc(svcs, byName)
	}
	for i, s := range svcs {
		nn := nnOf(s.Namespace, s.Name)
		if i > 0 && nn == nnOf(svcs[i-1].Namespace, svcs[i-1].Name) {
			b.problem(model.KindService, nn, "appears more than once in the input; only the first copy is used, remove the duplicate")
			continue
		}
		b.addService(s, bySvc[nn])
	}
	b.state = make(State, len(b.offers))
	b.claimAll(b.offers)

	return b.state, sortProblems(b.problems)
}

type builder struct {
	state     State
	offers    []offer
	node      nodeInfo
	nodeAddrs []netip.Addr  // where NodePorts are served, sorted
	ownAddrs  []netip.Addr  // this node's addresses, unfiltered, sorted: externalIPs it may capture
	peerAddrs model.AddrSet // the other Nodes' addresses: externalIPs it may capture too
	extCIDRs  []netip.Prefix
	primary   []netip.Addr // this node's primary addresses (allowFromNode)
	problems  []model.Problem
}

func (b *builder) problem(kind model.Kind, obj types.NamespacedName, format string, args ...any) {
	b.problems = append(b.problems, model.Problem{Kind: kind, Object: obj, Reason: fmt.Sprintf(format, args...)})
}

// servicePort is a ServicePort that passed validation.
type servicePort struct {
	name     string
	label    string // for messages: the quoted name, or the number if unnamed
	port     uint16
	proto    Protocol
	nodePort uint16 // 0: none
}

func (b *builder) addService(svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice) {
	nn := nnOf(svc.Namespace, svc.Name)
	// kube-proxy's Service informer selects on this label alone
	// (cmd/kube-proxy/app/server.go): the headless label does not make a
	// Service with a cluster IP headless; clusterIP None does (below).
	if _, other := svc.Labels[model.LabelServiceProxyName]; other {
		return
	}
	switch svc.Spec.Type {
	case "", corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		// An empty type is what the API server defaults to ClusterIP; a
		// manifests directory may hold undefaulted objects.
	case corev1.ServiceTypeExternalName:
		// A DNS alias: there is nothing to translate.
		return
	default:
		b.problem(model.KindService, nn, "spec.type %q is not ClusterIP, NodePort, LoadBalancer or ExternalName; the Service is ignored until spec.type is fixed", svc.Spec.Type)
		return
	}

	vips, ok := b.clusterIPs(nn, &svc.Spec)
	if !ok || len(vips) == 0 {
		return
	}
	ports := b.servicePorts(nn, &svc.Spec)
	if len(ports) == 0 {
		return
	}
	affinity := b.sessionAffinity(nn, &svc.Spec)
	internalLocal := b.internalPolicyLocal(nn, &svc.Spec)
	externalLocal := b.externalPolicyLocal(nn, &svc.Spec)
	extIPs := b.externalIPs(nn, &svc.Spec, vips)
	lbIPs := b.loadBalancerIPs(nn, &svc.Status, vips)
	sources := b.sourceRanges(nn, &svc.Spec)
	eps := b.parseSlices(svcSlices)

	for _, vip := range vips {
		is6 := vip.Is6()
		famExt, famLB := ofFamily(extIPs, is6), ofFamily(lbIPs, is6)
		ranges, closed := sources.of(is6)
		if closed && len(famLB) > 0 {
			b.problem(model.KindService, nn, "spec.loadBalancerSourceRanges has no valid %s range, and the entries that could not be parsed may have been meant for it: "+
				"its %s load-balancer IPs %v are not served until they are fixed (kube-proxy would let every source in)", familyName(is6), familyName(is6), famLB)
			famLB = nil
		}
		ranges = allowFromNode(ranges, famLB, b.primary)
		for _, sp := range ports {
			sets := selectBackends(candidateEndpoints(eps, is6, sp, b.node), internalLocal, externalLocal, b.node)
			internal, external := toBackends(sets.internal), toBackends(sets.external)
			local := toBackends(sets.externalLocal)
			// Once per set, shared by every frontend of it.
			lingerInternal, lingerExternal := lingering(sets.serving, internal), lingering(sets.serving, external)
			lingerLocal := lingering(sets.serving, local)
			frontend := func(kind Kind, addr netip.Addr, port uint16, backends, lingers []Backend) Frontend {
				return Frontend{
					Key:       FrontendKey{Addr: addr, Port: port, Proto: sp.proto},
					Kind:      kind,
					Service:   nn,
					PortName:  sp.name,
					Backends:  backends,
					Affinity:  affinity,
					LocalOnly: kind == KindClusterIP && internalLocal,
					Lingering: lingers,
				}
			}
			// addExternal offers an external frontend and, under
			// externalTrafficPolicy Local, its ScopeExternal twin. A
			// loopback address gets none: no packet from another machine
			// carries one (the kernel drops it as a martian).
			addExternal := func(kind Kind, addr netip.Addr, port uint16) {
				fe := frontend(kind, addr, port, external, lingerExternal)
				if kind == KindLoadBalancer {
					fe.SourceRanges = ranges
				}
				o := offer{label: sp.label, fe: fe}
				if externalLocal && !addr.IsLoopback() {
					twin := fe
					twin.Key.Scope = ScopeExternal
					twin.Backends, twin.PolicyDrop, twin.LocalOnly = local, sets.externalDrop, true
					twin.Lingering = lingerLocal
					o.twin = &twin
				}
				b.offers = append(b.offers, o)
			}

			cip := frontend(KindClusterIP, vip, sp.port, internal, lingerInternal)
			cip.PolicyDrop = sets.internalDrop
			b.offers = append(b.offers, offer{label: sp.label, fe: cip})
			if sp.nodePort != 0 {
				b.addNodePort(sp, is6, externalLocal, frontend(KindNodePort, unspecified(is6), sp.nodePort, external, lingerExternal),
					local, sets.externalDrop, lingerLocal)
			}
			for _, a := range famExt {
				addExternal(KindExternalIP, a, sp.port)
			}
			for _, a := range famLB {
				addExternal(KindLoadBalancer, a, sp.port)
			}
		}
	}
}

// addNodePort offers a Service port's NodePort of one family: one frontend
// at the unspecified address (0.0.0.0 or ::), whatever the number of
// addresses this node serves NodePorts on, as Cilium's NodePort entries.
// The datapath looks it up for a destination that node_addrs lists: this
// node's NodePort addresses (NodePortAddresses), and, unless the frontend
// is LocalNodeOnly, the other nodes' (RemoteNodeAddresses), so a socket
// here reaches another node's NodePort without crossing to that node. One
// entry per port instead of one per address keeps a node's NodePorts from
// multiplying its map entries by its addresses.
//
// For another node's address, kube-proxy leaves the packet to that node,
// for which it is external traffic: under externalTrafficPolicy Cluster
// that node picks from the same cluster-wide endpoints as here, so
// translating here changes nothing but the path. Under Local it picks
// only its own endpoints, and drops the packet when it has none (upstream
// e2e's terminating-endpoint fallback test checks that another node's
// NodePort fails then): so the frontend is LocalNodeOnly, the socket
// crosses to that node untranslated, and that node's per-packet path
// decides. Under Local the ScopeExternal twin serves packets from other
// machines; it exists when some NodePort address of the family can
// receive them (not loopback: no packet from another machine carries
// one, the kernel drops it as a martian).
func (b *builder) addNodePort(sp servicePort, is6, externalLocal bool, fe Frontend, local []Backend, drop bool, lingerLocal []Backend) {
	addrs := ofFamily(b.nodeAddrs, is6)
	if externalLocal && len(addrs) == 0 {
		return // served nowhere: not here, and not for other nodes
	}
	fe.LocalNodeOnly = externalLocal
	o := offer{label: sp.label, fe: fe}
	if externalLocal && slices.ContainsFunc(addrs, func(a netip.Addr) bool { return !a.IsLoopback() }) {
		twin := fe
		twin.Key.Scope = ScopeExternal
		twin.Backends, twin.PolicyDrop, twin.LocalOnly = local, drop, true
		twin.Lingering = lingerLocal
		o.twin = &twin
	}
	for _, a := range addrs {
		shadow := fe
		shadow.Key.Addr = a
		b.offers = append(b.offers, offer{label: sp.label, fe: shadow, shadow: true})
	}
	b.offers = append(b.offers, o)
}

// ofFamily is the addresses of one family, in their order.
func ofFamily(addrs []netip.Addr, is6 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if a.Is6() == is6 {
			out = append(out, a)
		}
	}
	return out
}

func unspecified(is6 bool) netip.Addr {
	if is6 {
		return netip.IPv6Unspecified()
	}
	return netip.IPv4Unspecified()
}

// clusterIPs returns the Service's cluster IPs, at most one per family. ok is
// false when the Service must be skipped as a whole. No addresses with ok
// true means there is nothing to program (headless, or not yet allocated).
func (b *builder) clusterIPs(nn types.NamespacedName, spec *corev1.ServiceSpec) (vips []netip.Addr, ok bool) {
	field, raw := "spec.clusterIPs", spec.ClusterIPs
	if len(raw) == 0 {
		field, raw = "spec.clusterIP", []string{spec.ClusterIP}
	}
	// kube-proxy decides headlessness on spec.clusterIP alone; clusterIPs[0]
	// mirrors it on any object the API server accepted.
	if spec.ClusterIP == corev1.ClusterIPNone || raw[0] == corev1.ClusterIPNone {
		return nil, true
	}
	if len(raw) == 1 && raw[0] == "" {
		// Unallocated: kube-proxy skips such a Service silently too.
		return nil, true
	}
	for i, s := range raw {
		name := field
		if field == "spec.clusterIPs" {
			name = fmt.Sprintf("%s[%d]", field, i)
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			b.problem(model.KindService, nn, "%s %q is not an IP address; the whole Service is ignored until it is fixed", name, s)
			return nil, false
		}
		if a.Zone() != "" {
			b.problem(model.KindService, nn, "%s %q has an IPv6 zone, which a cluster IP cannot have; the whole Service is ignored until it is fixed", name, s)
			return nil, false
		}
		// A mapped address is the IPv4 address it maps, as for kube-proxy's
		// IsIPv6String; the frontend key must be the plain form.
		a = a.Unmap()
		if why := specialAddr(a); why != "" {
			b.problem(model.KindService, nn, "%s %q is %s, which is never a cluster IP; the whole Service is ignored until it is fixed", name, s, why)
			return nil, false
		}
		if j := slices.IndexFunc(vips, func(v netip.Addr) bool { return v.Is4() == a.Is4() }); j >= 0 {
			b.problem(model.KindService, nn, "%s %q is a second %s cluster IP after %s; a Service has at most one per family, so it is ignored", name, s, familyName(a.Is6()), vips[j])
			continue
		}
		vips = append(vips, a)
	}
	return vips, true
}

// servicePorts validates spec.ports, reporting and dropping the ports that
// cannot be programmed.
func (b *builder) servicePorts(nn types.NamespacedName, spec *corev1.ServiceSpec) []servicePort {
	out := make([]servicePort, 0, len(spec.Ports))
	for i, p := range spec.Ports {
		label := portLabel(p.Name, p.Port)
		proto, ok := parseProtocol(p.Protocol)
		if !ok {
			b.problem(model.KindService, nn, "port %s has protocol %q; socklb handles TCP and UDP", label, p.Protocol)
			continue
		}
		if proto == SCTP {
			// The kernel runs no cgroup connect or sendmsg hook for SCTP:
			// sctp_inet_connect calls sctp_connect directly, and SCTP
			// has no pre_connect (net/sctp/socket.c; the hooks run from
			// __inet_stream_connect and inet_dgram_connect). Programming
			// the port would claim a translation that never happens.
			b.problem(model.KindService, nn, "port %s is SCTP, which socklb cannot serve: the kernel runs no cgroup connect hook for SCTP sockets; "+
				"run socklb beside kube-proxy (the chart's mode: beside), which keeps SCTP Services", label)
			continue
		}
		if p.Port < 1 || p.Port > 65535 {
			b.problem(model.KindService, nn, "port %s has port number %d; it must be 1-65535 (fix spec.ports[%d].port)", label, p.Port, i)
			continue
		}
		sp := servicePort{name: p.Name, label: label, port: uint16(p.Port), proto: proto}
		if j := slices.IndexFunc(out, func(o servicePort) bool { return o.port == sp.port && o.proto == sp.proto }); j >= 0 {
			b.problem(model.KindService, nn, "port %s repeats %d/%s of port %s; it is ignored, remove spec.ports[%d]", label, sp.port, sp.proto, out[j].label, i)
			continue
		}
		sp.nodePort = b.nodePort(nn, spec.Type, i, p)
		out = append(out, sp)
	}
	return out
}

// parseProtocol applies the API's default (TCP) to an empty protocol.
// Matching is case-sensitive, like the API server's validation.
func parseProtocol(p corev1.Protocol) (Protocol, bool) {
	switch p {
	case "", corev1.ProtocolTCP:
		return TCP, true
	case corev1.ProtocolUDP:
		return UDP, true
	case corev1.ProtocolSCTP:
		return SCTP, true
	}
	return 0, false
}

func toBackends(eps []endpoint) []Backend {
	if len(eps) == 0 {
		return nil
	}
	out := make([]Backend, 0, len(eps))
	for _, e := range eps {
		out = append(out, Backend{Addr: e.addr, Port: e.port})
	}
	slices.SortFunc(out, compareBackend)
	return slices.Compact(out)
}

func compareBackend(a, b Backend) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	return cmp.Compare(a.Port, b.Port)
}

// sortProblems groups the report by object, independently of input order,
// keeping each object's problems in the order of its fields, and drops exact
// repeats (two copies of one slice would otherwise report everything twice).
func sortProblems(ps []model.Problem) []model.Problem {
	slices.SortStableFunc(ps, func(a, b model.Problem) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), compareNN(a.Object, b.Object))
	})
	seen := make(map[model.Problem]bool, len(ps))
	return slices.DeleteFunc(ps, func(p model.Problem) bool {
		dup := seen[p]
		seen[p] = true
		return dup
	})
}

func nnOf(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

func compareNN(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

func portLabel(name string, port int32) string {
	if name != "" {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%d", port)
}

// specialAddr names the kinds of address the API server's ValidateNonSpecialIP
// refuses. A slice written by hand (or a manifests directory) bypasses that
// validation, and at the socket layer such an address is dangerous: a
// loopback cluster IP would capture the node's own connections to localhost,
// a loopback backend would send Service traffic to the node's own daemons.
func specialAddr(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "unspecified"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsLinkLocalMulticast():
		return "link-local multicast"
	}
	return ""
}

func familyName(is6 bool) string {
	if is6 {
		return "IPv6"
	}
	return "IPv4"
}
