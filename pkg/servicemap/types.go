// Package servicemap turns Kubernetes Services and EndpointSlices into the
// desired datapath state: one Frontend per (address, port, protocol) a client
// may connect to, each with the backends kube-proxy would pick from. It is
// pure: no kernel, no API calls, so every kube-proxy rule is a table test.
package servicemap

import (
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
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
// protocol. Addr is always unmapped (a plain IPv4 or IPv6 address).
type FrontendKey struct {
	Addr  netip.Addr
	Port  uint16
	Proto Protocol
}

func (k FrontendKey) String() string {
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.Addr, k.Port), k.Proto)
}

// Kind says why a frontend exists. Every kind is reached from a socket on
// this node; which backends it gets is in selectBackends.
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
	// connect with EHOSTUNREACH, distinct from ECONNREFUSED (no endpoints).
	// Backends is then empty. Only ClusterIP frontends (internalTrafficPolicy)
	// are ever PolicyDrop: see selectBackends for externalTrafficPolicy.
	PolicyDrop bool
	// LocalOnly says the backends are this node's only
	// (internalTrafficPolicy: Local); shown by `socklb inspect`.
	LocalOnly bool
}

// Equal reports whether the datapath would program a and b identically.
func (a Frontend) Equal(b Frontend) bool {
	if a.Key != b.Key || a.Kind != b.Kind || a.Service != b.Service ||
		a.PortName != b.PortName || len(a.Backends) != len(b.Backends) ||
		a.Affinity != b.Affinity || a.PolicyDrop != b.PolicyDrop || a.LocalOnly != b.LocalOnly {
		return false
	}
	for i := range a.Backends {
		if a.Backends[i] != b.Backends[i] {
			return false
		}
	}
	return true
}

// State is the whole desired datapath: every frontend of the node.
type State map[FrontendKey]Frontend

// Problem is an object, or part of one, that could not be used. The agent
// logs it and counts it; everything else is still programmed.
type Problem struct {
	Kind   string // "Service" or "EndpointSlice"
	Object types.NamespacedName
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s", p.Kind, p.ObjectName(), p.Reason)
}

// ObjectName is namespace/name, or the bare name of an object that is not
// namespaced (a file, a Node).
func (p Problem) ObjectName() string {
	if p.Object.Namespace == "" {
		return p.Object.Name
	}
	return p.Object.String()
}

// Input is every object Build reads: a snapshot of the API (or of the
// manifests directory) and the identity of this node.
type Input struct {
	Services []*corev1.Service
	Slices   []*discoveryv1.EndpointSlice
	Nodes    []*corev1.Node
	NodeName string
	// LocalAddresses are this node's interface addresses (found by the
	// agent with netlink); with the Node object's addresses they are where
	// NodePorts are served.
	LocalAddresses []netip.Addr
	// NodePortAddresses is kube-proxy's --nodeport-addresses filter, per
	// family: when it holds prefixes of a family, NodePorts of that family
	// are served only on node addresses inside them, 127.0.0.1 included
	// (see nodePortAddresses). The keywords "localhost" and "all" are
	// prefixes too (127.0.0.0/8 and ::1/128; 0.0.0.0/0 and ::/0), as
	// kube-proxy expands them.
	NodePortAddresses []netip.Prefix
	// ExternalIPCIDRs is the operator's --external-ip-cidrs allowlist: an
	// externalIP is captured when it is an address of this node (as
	// Cilium's socket LB does) or falls inside one of these prefixes.
	// Anything else is refused, because whoever may create a Service could
	// otherwise redirect every connection of the node to any address
	// (CVE-2020-8554).
	ExternalIPCIDRs []netip.Prefix
	// NodePortPrimary is the keyword "primary" of --nodeport-addresses:
	// the filter also holds this node's primary IPv4 and IPv6 addresses,
	// taken from its Node object when Build runs (see primaryNodeIPs).
	NodePortPrimary bool
}
