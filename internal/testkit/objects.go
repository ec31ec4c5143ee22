package testkit

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Kubernetes objects the tests feed socklb, built the way the API server
// and the EndpointSlice controller write them, so that a table case states
// only the one fact it is about. "ns/name" names an object; a bare name is
// in "default".

// Ptr is the address of a copy of v (optional API fields are pointers).
func Ptr[T any](v T) *T { return &v }

func splitName(nsName string) (ns, name string) {
	if ns, name, ok := strings.Cut(nsName, "/"); ok {
		return ns, name
	}
	return metav1.NamespaceDefault, nsName
}

// Service builds a ClusterIP Service; ips is "" (the API server allocates),
// "v4" or "v4,v6" and goes to spec.clusterIPs and spec.clusterIP, which the
// API server keeps equal.
func Service(nsName, ips string, ports ...corev1.ServicePort) *corev1.Service {
	ns, name := splitName(nsName)
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: ports},
	}
	if ips != "" {
		s.Spec.ClusterIPs = strings.Split(ips, ",")
		s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
	}
	return s
}

// ServicePort is one port of a Service; targetPort is left unset, as
// socklb resolves ports by name through the EndpointSlice (kube-proxy too).
func ServicePort(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

// EndpointSlice builds a slice of the Service svcName ("": no service-name
// label, a slice no Service owns).
func EndpointSlice(nsName, svcName string, at discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	ns, name := splitName(nsName)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		AddressType: at,
		Ports:       ports,
		Endpoints:   eps,
	}
	if svcName != "" {
		s.Labels[discoveryv1.LabelServiceName] = svcName
	}
	return s
}

// EndpointPort is one port of an EndpointSlice.
func EndpointPort(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: Ptr(name), Protocol: Ptr(proto), Port: Ptr(port)}
}

// Endpoint builds an endpoint with explicit conditions; nil stays nil (an
// old writer that sets none).
func Endpoint(addr string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating},
	}
}

// The condition sets the EndpointSlice controller writes.

func ReadyEndpoint(addr string) discoveryv1.Endpoint {
	return Endpoint(addr, Ptr(true), Ptr(true), Ptr(false))
}

func NotReadyEndpoint(addr string) discoveryv1.Endpoint {
	return Endpoint(addr, Ptr(false), Ptr(false), Ptr(false))
}

func ServingTerminatingEndpoint(addr string) discoveryv1.Endpoint {
	return Endpoint(addr, Ptr(false), Ptr(true), Ptr(true))
}

func TerminatingNotServingEndpoint(addr string) discoveryv1.Endpoint {
	return Endpoint(addr, Ptr(false), Ptr(false), Ptr(true))
}

// OnNode puts an endpoint on a node (spec.nodeName of its Pod).
func OnNode(node string, e discoveryv1.Endpoint) discoveryv1.Endpoint {
	e.NodeName = Ptr(node)
	return e
}

// Node builds a Node labelled with its hostname, as the kubelet registers
// it; zone "" leaves the zone label out. addrs are "Type=address" pairs for
// status.addresses ("InternalIP=10.0.0.1").
func Node(name, zone string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	for _, a := range addrs {
		typ, addr, _ := strings.Cut(a, "=")
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(typ), Address: addr})
	}
	return n
}
