package servicemap

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Constructors keep each table case to the one fact it is about.

func ptr[T any](v T) *T { return &v }

// svc builds a ClusterIP Service; ips is "v4" or "v4,v6" and goes to
// spec.clusterIPs (and spec.clusterIP, as the API server keeps them equal).
func svc(nsName, ips string, ports ...corev1.ServicePort) *corev1.Service {
	ns, name, _ := strings.Cut(nsName, "/")
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

func sport(name string, proto corev1.Protocol, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: port}
}

// withTargetPort shows that spec.targetPort is never consulted.
func withTargetPort(p corev1.ServicePort, target int32) corev1.ServicePort {
	p.TargetPort = intstr.FromInt32(target)
	return p
}

// slice builds an EndpointSlice of the Service svcName (empty: no label).
func slice(nsName, svcName string, at discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	ns, name, _ := strings.Cut(nsName, "/")
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

func v4(nsName, svcName string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return slice(nsName, svcName, discoveryv1.AddressTypeIPv4, ports, eps...)
}

func v6(nsName, svcName string, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return slice(nsName, svcName, discoveryv1.AddressTypeIPv6, ports, eps...)
}

func eports(ps ...discoveryv1.EndpointPort) []discoveryv1.EndpointPort { return ps }

func eport(name string, proto corev1.Protocol, port int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr(name), Protocol: ptr(proto), Port: ptr(port)}
}

// cond builds an endpoint with explicit conditions; nil stays nil.
func cond(addr string, ready, serving, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{
		Addresses:  []string{addr},
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Serving: serving, Terminating: terminating},
	}
}

var yes, no = ptr(true), ptr(false)

// The condition sets the EndpointSlice controller writes.
func ready(addr string) discoveryv1.Endpoint    { return cond(addr, yes, yes, no) }
func notReady(addr string) discoveryv1.Endpoint { return cond(addr, no, no, no) }
func servingTerminating(addr string) discoveryv1.Endpoint {
	return cond(addr, no, yes, yes)
}
func terminatingNotServing(addr string) discoveryv1.Endpoint {
	return cond(addr, no, no, yes)
}

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
		out = append(out, fmt.Sprintf("%s %s %s:%s -> [%s]", k, fe.Kind, fe.Service, fe.PortName, strings.Join(bs, " ")))
	}
	return out
}

func compareKey(a, b FrontendKey) int {
	if c := a.Addr.Compare(b.Addr); c != 0 {
		return c
	}
	if a.Port != b.Port {
		return int(a.Port) - int(b.Port)
	}
	return int(a.Proto) - int(b.Proto)
}

func renderProblems(ps []Problem) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// checkInvariants holds for any input whatsoever; the table tests and the
// fuzzer both run it.
func checkInvariants(t *testing.T, in Input, st State, ps []Problem) {
	t.Helper()
	names := map[string]bool{}
	for _, s := range in.Services {
		if s != nil {
			names[s.Namespace+"/"+s.Name] = true
		}
	}
	validAddr := func(a netip.Addr) bool {
		return a.IsValid() && a.Zone() == "" && !a.Is4In6() && specialAddr(a) == ""
	}
	for k, fe := range st {
		if fe.Key != k {
			t.Errorf("frontend filed under %s has key %s", k, fe.Key)
		}
		if !validAddr(k.Addr) || k.Port == 0 {
			t.Errorf("frontend %s: invalid address or zero port", k)
		}
		if k.Proto != TCP && k.Proto != UDP && k.Proto != SCTP {
			t.Errorf("frontend %s: protocol %d", k, k.Proto)
		}
		if fe.Kind != KindClusterIP {
			t.Errorf("frontend %s: kind %s", k, fe.Kind)
		}
		if !names[fe.Service.String()] {
			t.Errorf("frontend %s: service %s is not in the input", k, fe.Service)
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
	}
	for i, p := range ps {
		if p.Kind != kindService && p.Kind != kindEndpointSlice {
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
