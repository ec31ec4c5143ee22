package kube

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/pkg/model"
)

// The informers hold every Service and EndpointSlice of the cluster for
// the agent's lifetime: at 100 000 Services, a third of the agent's heap.
// The protobuf decoder gives every string and every pointer field of every
// object its own allocation, though most of them repeat across objects (a
// condition's true, a node's name, "TCP"). What follows keeps the same
// types servicemap reads, with the fields it never reads gone and the
// repeated values shared. Informer objects are read-only by client-go's
// contract, so sharing a pointer between objects is safe; nothing in
// socklb writes through one (the caches hand out the objects themselves).

// readLabels are the only labels socklb reads of a Service or a slice:
// a Service handed to another proxy, a headless Service's slices, and the
// Service a slice belongs to (also the informer's index).
var readLabels = []string{model.LabelServiceProxyName, model.LabelHeadless, discoveryv1.LabelServiceName}

// trimMeta drops the metadata nobody reads: managed fields, owner
// references (a slice's one reference is five strings and two pointers),
// finalizers, the generated-name prefix, and every label but readLabels.
// Name, namespace, UID and resourceVersion stay (change detection and
// Events), and the creation time (admission orders by it).
func trimMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.OwnerReferences = nil
	m.Finalizers = nil
	m.GenerateName = ""
	var kept map[string]string
	for _, k := range readLabels {
		if v, ok := m.Labels[k]; ok {
			if kept == nil {
				kept = make(map[string]string, 1)
			}
			kept[k] = v
		}
	}
	m.Labels = kept
}

// compactService drops the selector (endpoints come from slices, as in
// kube-proxy) and the status conditions, and shares the enum strings and
// pointers every Service repeats.
func compactService(s *corev1.Service, in *interner) {
	s.Spec.Selector = nil
	s.Status.Conditions = nil
	s.Spec.Type = corev1.ServiceType(in.str(string(s.Spec.Type)))
	s.Spec.SessionAffinity = corev1.ServiceAffinity(in.str(string(s.Spec.SessionAffinity)))
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicy(in.str(string(s.Spec.ExternalTrafficPolicy)))
	s.Spec.IPFamilyPolicy = sharedPtr(in, s.Spec.IPFamilyPolicy)
	s.Spec.InternalTrafficPolicy = sharedPtr(in, s.Spec.InternalTrafficPolicy)
	s.Spec.TrafficDistribution = sharedPtr(in, s.Spec.TrafficDistribution)
	for i, f := range s.Spec.IPFamilies {
		s.Spec.IPFamilies[i] = corev1.IPFamily(in.str(string(f)))
	}
	// The decoder allocates spec.clusterIP and spec.clusterIPs[0] apart;
	// the API server keeps them equal.
	if len(s.Spec.ClusterIPs) > 0 && s.Spec.ClusterIPs[0] == s.Spec.ClusterIP {
		s.Spec.ClusterIP = s.Spec.ClusterIPs[0]
	}
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		p.Name = in.str(p.Name)
		p.Protocol = corev1.Protocol(in.str(string(p.Protocol)))
		p.AppProtocol = sharedPtr(in, p.AppProtocol)
	}
}

// compactSlice drops the endpoint fields servicemap never reads (the Pod
// reference, hostname, deprecated topology: a targetRef alone is seven
// strings per endpoint) and the spare capacity the decoder's appends left
// (a slice of 10 endpoints holds an array of 16), and shares what every
// endpoint of a cluster repeats: the condition booleans, node and zone
// names, port names and protocols.
func compactSlice(s *discoveryv1.EndpointSlice, in *interner) {
	s.AddressType = discoveryv1.AddressType(in.str(string(s.AddressType)))
	if cap(s.Endpoints) > len(s.Endpoints) {
		s.Endpoints = slices.Clone(s.Endpoints)
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		e.TargetRef = nil
		e.Hostname = nil
		e.DeprecatedTopology = nil
		e.Conditions.Ready = sharedBool(e.Conditions.Ready)
		e.Conditions.Serving = sharedBool(e.Conditions.Serving)
		e.Conditions.Terminating = sharedBool(e.Conditions.Terminating)
		e.NodeName = sharedPtr(in, e.NodeName)
		e.Zone = sharedPtr(in, e.Zone)
	}
	for i := range s.Ports {
		p := &s.Ports[i]
		p.Name = sharedPtr(in, p.Name)
		p.Protocol = sharedPtr(in, p.Protocol)
		p.AppProtocol = sharedPtr(in, p.AppProtocol)
	}
}

var yes, no = true, false

func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &yes
	default:
		return &no
	}
}

// sharedPtr returns the one pointer the interner keeps for *p's value.
func sharedPtr[T ~string](in *interner, p *T) *T {
	if p == nil {
		return nil
	}
	return in.get(ptrKey{*p}, func() any { v := *p; return &v }).(*T)
}

// maxInterned bounds the table: node, zone, port and enum names are few
// in any cluster, but a cluster that names every port differently must
// not grow it without end. Past the bound a value is kept as decoded.
const maxInterned = 1 << 14

// interner keeps one copy of each repeated value: a string, or a pointer
// to one of the string types. Keys carry their type (a *Protocol "TCP"
// and a *string "TCP" are two entries). Transforms of different informers run on
// their own goroutines.
type interner struct {
	mu   sync.Mutex
	vals map[any]any
}

func newInterner() *interner { return &interner{vals: map[any]any{}} }

// A pointer and a string of the same value are two entries.
type (
	ptrKey struct{ v any }
	strKey struct{ s string }
)

func (in *interner) get(key any, make func() any) any {
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.vals[key]; ok {
		return v
	}
	v := make()
	if len(in.vals) < maxInterned {
		in.vals[key] = v
	}
	return v
}

func (in *interner) str(s string) string {
	if s == "" {
		return ""
	}
	return in.get(strKey{s}, func() any { return s }).(string)
}
