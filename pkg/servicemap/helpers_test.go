package servicemap

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/model"
)

// Constructors keep each table case to the one fact it is about; the
// object builders are the test kit's, under short names.

func ptr[T any](v T) *T { return testkit.Ptr(v) }

var (
	svc   = testkit.Service
	sport = testkit.ServicePort
	slice = testkit.EndpointSlice
	eport = testkit.EndpointPort
	cond  = testkit.Endpoint

	ready                 = testkit.ReadyEndpoint
	notReady              = testkit.NotReadyEndpoint
	servingTerminating    = testkit.ServingTerminatingEndpoint
	terminatingNotServing = testkit.TerminatingNotServingEndpoint
)

func withType(s *corev1.Service, t corev1.ServiceType) *corev1.Service {
	s.Spec.Type = t
	return s
}

func withLabel(s *corev1.Service, k, v string) *corev1.Service {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[k] = v
	return s
}

// withTargetPort shows that spec.targetPort is never consulted.
func withTargetPort(p corev1.ServicePort, target int32) corev1.ServicePort {
	p.TargetPort = intstr.FromInt32(target)
	return p
}

func v4(nsName, svcName string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return slice(nsName, svcName, discoveryv1.AddressTypeIPv4, ports, eps...)
}

func v6(nsName, svcName string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return slice(nsName, svcName, discoveryv1.AddressTypeIPv6, ports, eps...)
}

func eports(ps ...discoveryv1.EndpointPort) []discoveryv1.EndpointPort { return ps }

var yes, no = ptr(true), ptr(false)

// render prints a State one frontend per line, in key order, so a failing
// case shows the whole picture.
func render(st State) []string {
	keys := make([]FrontendKey, 0, len(st))
	for k := range st {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareKey)
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		fe := st[k]
		bs := make([]string, 0, len(fe.Backends))
		for _, b := range fe.Backends {
			bs = append(bs, b.String())
		}
		line := fmt.Sprintf("%s %s %s:%s -> [%s]", k, fe.Kind, fe.Service, fe.PortName, strings.Join(bs, " "))
		if fe.Affinity != 0 {
			line += " affinity=" + fe.Affinity.String()
		}
		if fe.PolicyDrop {
			line += " drop"
		}
		if len(fe.SourceRanges) > 0 {
			line += fmt.Sprintf(" sources=%v", fe.SourceRanges)
		}
		out = append(out, line)
	}
	return out
}

// renderServed is render of what the state serves at each address: a
// NodePort frontend (at the unspecified address) once per NodePort address
// of this node in its family, where no other frontend has that address and
// port (the datapath looks it up only when the exact key misses), its
// ScopeExternal twin only at addresses a packet from another machine can
// carry (not loopback), and as itself, the other nodes' wildcard, unless
// it is LocalNodeOnly. That is the datapath's lookup (lb_frontend,
// extlb_frontend), so the cases state per address what kube-proxy serves.
func renderServed(st State, in model.Input) []string {
	addrs := NodePortAddresses(in)
	out := State{}
	for k, fe := range st {
		if fe.Kind != KindNodePort || !k.Addr.IsUnspecified() {
			out[k] = fe
			continue
		}
		if k.Scope == ScopeAny && !fe.LocalNodeOnly {
			out[k] = fe
		}
		for _, a := range addrs {
			if a.Is6() != k.Addr.Is6() || k.Scope == ScopeExternal && a.IsLoopback() {
				continue
			}
			at := FrontendKey{Addr: a, Port: k.Port, Proto: k.Proto}
			if _, taken := st[at]; taken {
				continue
			}
			at.Scope = k.Scope
			e := fe
			e.Key, e.LocalNodeOnly = at, false
			out[at] = e
		}
	}
	return render(out)
}

func compareKey(a, b FrontendKey) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	if a.Proto != b.Proto {
		return int(a.Proto) - int(b.Proto)
	}
	return int(a.Scope) - int(b.Scope)
}

func renderProblems(ps []model.Problem) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// checkInvariants holds for any input whatsoever; the table tests and the
// fuzzer both run it.
func checkInvariants(t *testing.T, in model.Input, st State, ps []model.Problem) {
	t.Helper()
	// The first copy of a duplicated Service is the one Build uses.
	services := map[types.NamespacedName]*corev1.Service{}
	for _, s := range in.Services {
		if s == nil {
			continue
		}
		if nn := nnOf(s.Namespace, s.Name); services[nn] == nil {
			services[nn] = s
		}
	}
	validAddr := func(a netip.Addr) bool {
		return a.IsValid() && a.Zone() == "" && !a.Is4In6() && specialAddr(a) == "" && !a.IsMulticast()
	}
	// Backends of the external frontends of one service port and family,
	// and of its ClusterIP frontend, to compare below.
	type portFamily struct {
		svc      types.NamespacedName
		portName string
		proto    Protocol
		is6      bool
	}
	external := map[portFamily][]Backend{}
	internal := map[portFamily][]Backend{}

	for k, fe := range st {
		if fe.Key != k {
			t.Errorf("frontend filed under %s has key %s", k, fe.Key)
		}
		if k.Port == 0 {
			t.Errorf("frontend %s: zero port", k)
		}
		if k.Proto != TCP && k.Proto != UDP {
			t.Errorf("frontend %s: protocol %d", k, k.Proto)
		}
		svc := services[fe.Service]
		if svc == nil {
			t.Errorf("frontend %s: service %s is not in the input", k, fe.Service)
			continue
		}
		switch fe.Kind {
		case KindClusterIP, KindExternalIP, KindLoadBalancer:
			if !validAddr(k.Addr) {
				t.Errorf("frontend %s (%s): invalid address", k, fe.Kind)
			}
		case KindNodePort:
			// One per port, served at the node addresses by lookup.
			if !k.Addr.IsUnspecified() {
				t.Errorf("frontend %s: NodePort at a node address; NodePorts are frontends of the unspecified address", k)
			}
		default:
			t.Errorf("frontend %s: kind %s", k, fe.Kind)
		}
		switch fe.Kind {
		case KindExternalIP:
			if !slices.ContainsFunc(svc.Spec.ExternalIPs, func(s string) bool { return parsesTo(s, k.Addr) }) {
				t.Errorf("frontend %s: ExternalIP not in spec.externalIPs of %s", k, fe.Service)
			}
		case KindLoadBalancer:
			if !slices.ContainsFunc(svc.Status.LoadBalancer.Ingress, func(ing corev1.LoadBalancerIngress) bool {
				return parsesTo(ing.IP, k.Addr) && (ing.IPMode == nil || *ing.IPMode == corev1.LoadBalancerIPModeVIP)
			}) {
				t.Errorf("frontend %s: LoadBalancer IP not a VIP-mode ingress IP of %s", k, fe.Service)
			}
		}
		if len(fe.SourceRanges) > 0 && fe.Kind != KindLoadBalancer {
			t.Errorf("frontend %s (%s): source ranges %v on a frontend that is not a LoadBalancer", k, fe.Kind, fe.SourceRanges)
		}
		for i, p := range fe.SourceRanges {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is6() != k.Addr.Is6() || p.Addr().Is4In6() {
				t.Errorf("frontend %s: source range %s: invalid, not masked or of the other family", k, p)
			}
			if i > 0 && fe.SourceRanges[i-1].Compare(p) >= 0 {
				t.Errorf("frontend %s: source ranges not strictly ascending: %v", k, fe.SourceRanges)
			}
		}
		switch k.Scope {
		case ScopeAny:
		case ScopeExternal:
			// A twin exists only beside the ScopeAny frontend it doubles,
			// for a Service with externalTrafficPolicy Local.
			sib := k
			sib.Scope = ScopeAny
			s, ok := st[sib]
			if !ok || s.Service != fe.Service || s.PortName != fe.PortName || s.Kind != fe.Kind || !slices.Equal(s.SourceRanges, fe.SourceRanges) {
				t.Errorf("frontend %s: external twin of %s:%s without its ScopeAny frontend (%+v)", k, fe.Service, fe.PortName, s)
			}
			if fe.Kind == KindClusterIP || k.Addr.IsLoopback() || k.Addr.IsUnspecified() != (fe.Kind == KindNodePort) || !fe.LocalOnly || !externalLocal(svc) {
				t.Errorf("frontend %s (%s): an external twin must be a LocalOnly NodePort, ExternalIP or LoadBalancer frontend on a non-loopback address of an externalTrafficPolicy Local Service", k, fe.Kind)
			}
		default:
			t.Errorf("frontend %s: scope %s", k, k.Scope)
		}
		if fe.PolicyDrop && (len(fe.Backends) > 0 || fe.Kind != KindClusterIP && k.Scope != ScopeExternal) {
			t.Errorf("frontend %s (%s): PolicyDrop with %d backends; only an empty ClusterIP frontend or external twin may drop", k, fe.Kind, len(fe.Backends))
		}
		if fe.Affinity < 0 || fe.Affinity > maxAffinitySeconds*time.Second || fe.Affinity%time.Second != 0 {
			t.Errorf("frontend %s: affinity %s", k, fe.Affinity)
		}
		for i, b := range fe.Backends {
			if !validAddr(b.Addr) || b.Port == 0 {
				t.Errorf("frontend %s: backend %s: invalid address or zero port", k, b)
			}
			if b.Addr.Is6() != k.Addr.Is6() {
				t.Errorf("frontend %s: backend %s of the other family", k, b)
			}
			if i > 0 && compareBackend(fe.Backends[i-1], b) >= 0 {
				t.Errorf("frontend %s: backends not strictly ascending: %s then %s", k, fe.Backends[i-1], b)
			}
		}

		pf := portFamily{fe.Service, fe.PortName, k.Proto, k.Addr.Is6()}
		if fe.Kind == KindClusterIP {
			internal[pf] = fe.Backends
			continue
		}
		if k.Scope == ScopeExternal {
			continue
		}
		// Sockets on the node take kube-proxy's short-circuit: every
		// ScopeAny external frontend of a service port shares its
		// backends, whatever externalTrafficPolicy says.
		if prev, ok := external[pf]; ok && !slices.Equal(prev, fe.Backends) {
			t.Errorf("frontend %s: external backends %v differ from another external frontend's %v", k, fe.Backends, prev)
		}
		external[pf] = fe.Backends
	}
	// Without internalTrafficPolicy Local, ClusterIP and external frontends
	// pick from the same endpoints.
	for pf, ext := range external {
		cip, ok := internal[pf]
		p := services[pf.svc].Spec.InternalTrafficPolicy
		if ok && (p == nil || *p != corev1.ServiceInternalTrafficPolicyLocal) && !slices.Equal(cip, ext) {
			t.Errorf("%v: ClusterIP backends %v differ from external %v without internalTrafficPolicy Local", pf, cip, ext)
		}
	}

	for i, p := range ps {
		if p.Kind != model.KindService && p.Kind != model.KindEndpointSlice && p.Kind != model.KindNode {
			t.Errorf("problem %q: kind %q", p, p.Kind)
		}
		if p.Reason == "" {
			t.Errorf("problem %v has no reason", p)
		}
		if i > 0 && reflect.DeepEqual(ps[i-1], p) {
			t.Errorf("problem reported twice: %s", p)
		}
	}
}

// isNodePortAddr restates the NodePort address rules independently of
// nodeport.go: 127.0.0.1, an interface address or this Node's InternalIP or
// ExternalIP; never ::1, link-local, multicast or unspecified; inside the
// filter's prefixes of its family, if there are any.
func isNodePortAddr(in model.Input, a netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" || a.Is4In6() || a.IsUnspecified() || a.IsLinkLocalUnicast() || a.IsMulticast() ||
		a == netip.IPv6Loopback() || a == netip.MustParseAddr("255.255.255.255") {
		return false
	}
	known := a == netip.MustParseAddr("127.0.0.1") ||
		slices.ContainsFunc(in.LocalAddresses, func(l netip.Addr) bool { return l.Unmap() == a })
	for _, n := range in.Nodes {
		if n == nil || in.NodeName == "" || n.Name != in.NodeName {
			continue
		}
		for _, na := range n.Status.Addresses {
			if (na.Type == corev1.NodeInternalIP || na.Type == corev1.NodeExternalIP) && parsesTo(na.Address, a) {
				known = true
			}
		}
	}
	if !known {
		return false
	}
	filter := in.NodePortAddresses
	if in.NodePortPrimary && known {
		// Restated from kube-proxy's GetNodeHostIPs: the first InternalIP,
		// else ExternalIP, and the first of the other family.
		var host []netip.Addr
		for _, typ := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
			for _, n := range in.Nodes {
				if n == nil || in.NodeName == "" || n.Name != in.NodeName {
					continue
				}
				for _, na := range n.Status.Addresses {
					if p, err := netip.ParseAddr(na.Address); na.Type == typ && err == nil && p.Zone() == "" {
						host = append(host, p.Unmap())
					}
				}
			}
		}
		for i, h := range host {
			if (i == 0 || h.Is4() != host[0].Is4()) && !h.IsLoopback() {
				filter = append(slices.Clip(filter), netip.PrefixFrom(h, h.BitLen()))
				if i > 0 {
					break
				}
			}
		}
	}
	filtered, inside := false, false
	for _, p := range filter {
		if p.IsValid() && p.Addr().Is4() == a.Is4() {
			filtered = true
			inside = inside || p.Contains(a)
		}
	}
	return !filtered || inside
}

// externalLocal restates kube-proxy's ExternalPolicyLocal: Local, on a
// Service reachable from outside by its type.
func externalLocal(svc *corev1.Service) bool {
	t := svc.Spec.Type
	return svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal &&
		(t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer ||
			(t == "" || t == corev1.ServiceTypeClusterIP) && len(svc.Spec.ExternalIPs) > 0)
}

func parsesTo(s string, a netip.Addr) bool {
	p, err := netip.ParseAddr(s)
	return err == nil && p.Zone() == "" && p.Unmap() == a
}
