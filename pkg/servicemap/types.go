// Package servicemap turns Kubernetes Services and EndpointSlices into the
// desired datapath state: one Frontend per (address, port, protocol) a client
// may connect to, each with the backends kube-proxy would pick from, plus a
// ScopeExternal twin where packets from other machines must be answered
// differently (externalTrafficPolicy Local). It also says where the other
// nodes serve NodePorts (RemoteNodeAddresses). It is pure: no kernel, no
// API calls, so every kube-proxy rule is a table test. It is the one place
// that knows Service semantics: the datapath programs what it is given.
package servicemap

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Protocol is the IANA protocol number, the value the kernel puts in
// bpf_sock_addr.protocol, so the datapath needs no translation table.
type Protocol uint8

const (
	TCP  Protocol = 6
	UDP  Protocol = 17
	SCTP Protocol = 132
)

func (p Protocol) String() string {
	switch p {
	case TCP:
		return "TCP"
	case UDP:
		return "UDP"
	case SCTP:
		return "SCTP"
	}
	return fmt.Sprintf("proto-%d", uint8(p))
}

// FrontendKey is what KUBE-SERVICES matches on: destination address, port and
// protocol, and which traffic the entry is for. Addr is always unmapped (a
// plain IPv4 or IPv6 address).
type FrontendKey struct {
	Addr  netip.Addr
	Port  uint16
	Proto Protocol
	Scope Scope
}

func (k FrontendKey) String() string {
	s := fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.Addr, k.Port), k.Proto)
	if k.Scope == ScopeExternal {
		s += "/external"
	}
	return s
}

// Scope says which traffic a frontend serves. kube-proxy treats traffic
// that starts on the node (its processes and pods) and packets that arrive
// from other machines alike except for externalTrafficPolicy Local, which
// only governs the latter (see selectBackends); a Scope keeps the two
// answers apart under one address, port and protocol. The datapath stores
// it in the spare byte of the BPF key.
type Scope uint8

const (
	// ScopeAny serves sockets on this node, and packets from other
	// machines when no ScopeExternal entry exists for the same address,
	// port and protocol. Every frontend but the eTP Local twins has it.
	ScopeAny Scope = 0
	// ScopeExternal serves only packets from other machines: the
	// externalTrafficPolicy Local twin of an external frontend.
	ScopeExternal Scope = 1
)

func (s Scope) String() string {
	switch s {
	case ScopeAny:
		return "any"
	case ScopeExternal:
		return "external"
	}
	return fmt.Sprintf("scope-%d", uint8(s))
}

// Kind says why a frontend exists. Every kind is reached from a socket on
// this node and, through the node's devices, from other machines; which
// backends it gets is in selectBackends.
type Kind uint8

const (
	KindClusterIP Kind = iota
	KindNodePort
	KindExternalIP
	KindLoadBalancer
)

func (k Kind) String() string {
	switch k {
	case KindClusterIP:
		return "ClusterIP"
	case KindNodePort:
		return "NodePort"
	case KindExternalIP:
		return "ExternalIP"
	case KindLoadBalancer:
		return "LoadBalancer"
	}
	return fmt.Sprintf("kind-%d", uint8(k))
}

// Backend is one KUBE-SEP: a pod address and the resolved target port.
type Backend struct {
	Addr netip.Addr
	Port uint16
}

func (b Backend) String() string { return netip.AddrPortFrom(b.Addr, b.Port).String() }

// Frontend is one KUBE-SVC chain: a frontend and the backends it spreads over.
// Backends is sorted (by address, then port) and free of duplicates, so two
// Frontends built from the same objects compare equal with Equal. The
// external frontends of one service port share one Backends array: read it,
// never write it.
type Frontend struct {
	Key      FrontendKey
	Kind     Kind
	Service  types.NamespacedName
	PortName string
	Backends []Backend
	// Affinity is sessionAffinity ClientIP's timeout; zero means none.
	Affinity time.Duration
	// PolicyDrop marks a frontend whose Service has endpoints, none of
	// which its traffic policy (Local) lets this node use. kube-proxy DROPs
	// such traffic; a socket cannot be dropped, so the datapath fails the
	// connect with EHOSTUNREACH, distinct from ECONNREFUSED (no endpoints),
	// and drops such a packet. Backends is then empty. Only ClusterIP
	// frontends (internalTrafficPolicy) and ScopeExternal twins
	// (externalTrafficPolicy) are ever PolicyDrop: see selectBackends.
	PolicyDrop bool
	// LocalOnly says the backends are this node's only (internalTrafficPolicy
	// Local on a ClusterIP, externalTrafficPolicy Local on a ScopeExternal
	// twin); shown by `socklb inspect`.
	LocalOnly bool
	// SourceRanges is spec.loadBalancerSourceRanges of the frontend's
	// family, as kube-proxy reads them (see sourceRanges): masked, sorted
	// and free of duplicates, set on LoadBalancer frontends only; empty
	// means any source. A source outside every range is dropped, as by
	// kube-proxy's KUBE-FW chain, whether it comes from another machine or
	// from a socket on the node.
	SourceRanges []netip.Prefix
	// LocalNodeOnly marks a NodePort frontend (at the unspecified address,
	// served at this node's NodePort addresses) that must not serve the
	// other nodes' addresses: externalTrafficPolicy Local (see addNodePort).
	LocalNodeOnly bool
	// Lingering is the Service port's serving endpoints (of the family)
	// that Backends leaves out: terminating while another is ready, or
	// left out by a traffic policy or topology. New connections never go
	// to them, but sockets already sent there stay: kube-proxy clears a
	// flow only once its endpoint stops serving, and ignores "traffic
	// policies, topology, or terminating status" (conntrack/cleanup.go).
	// Sorted, never in Backends.
	Lingering []Backend
}

// Equal reports whether the datapath would program a and b identically.
func (a Frontend) Equal(b Frontend) bool {
	if a.Key != b.Key || a.Kind != b.Kind || a.Service != b.Service ||
		a.PortName != b.PortName || len(a.Backends) != len(b.Backends) ||
		a.Affinity != b.Affinity || a.PolicyDrop != b.PolicyDrop || a.LocalOnly != b.LocalOnly || a.LocalNodeOnly != b.LocalNodeOnly {
		return false
	}
	for i := range a.Backends {
		if a.Backends[i] != b.Backends[i] {
			return false
		}
	}
	return slices.Equal(a.SourceRanges, b.SourceRanges) && slices.Equal(a.Lingering, b.Lingering)
}

// State is the whole desired datapath: every frontend of the node.
type State map[FrontendKey]Frontend
