package kube

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestTrimKeepsWhatIsRead: the transform drops managedFields, annotations
// (but a slice's last-change-trigger-time) and a Node's images, and
// servicemap builds the same state and health checks from the trimmed
// objects as from the originals.
func TestTrimKeepsWhatIsRead(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	svc := service("web", map[string]string{"app": "web"}, 80)
	svc.ManagedFields = mf
	svc.Annotations = map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 30999
	svc.Spec.Ports[0].NodePort = 30080
	svc.Spec.Selector = map[string]string{"app": "web"}
	sl := slice("web-1", "web")
	sl.ManagedFields = mf
	// What the EndpointSlice controller writes of a slice's metadata and
	// nothing reads but the service-name label.
	sl.GenerateName = "web-"
	sl.Labels["app"] = "web"
	sl.Labels[discoveryv1.LabelManagedBy] = "endpointslice-controller.k8s.io"
	sl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "web", UID: "0b6c1c7e-0000-4000-8000-000000000002", Controller: ptr(true)}}
	when := time.Now().UTC().Format(time.RFC3339Nano)
	sl.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: when, "other": "x"}
	sl.Ports = []discoveryv1.EndpointPort{{Name: ptr(""), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}}
	sl.Endpoints[0].NodeName = ptr("n1")
	sl.Endpoints[0].Conditions.Ready = ptr(true)
	sl.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z1"}}}
	// A second endpoint for another zone: the Node's zone label decides.
	sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.244.2.12"}, NodeName: ptr("n2"),
		Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
		Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "z2"}}}})
	// What the EndpointSlice controller writes and servicemap never reads,
	// in an array with the decoder's spare capacity.
	sl.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1", UID: "0b6c1c7e-0000-4000-8000-000000000001"}
	sl.Endpoints[0].Hostname = ptr("web-1")
	sl.Endpoints[0].DeprecatedTopology = map[string]string{corev1.LabelHostname: "n1"}
	sl.Endpoints = append(make([]discoveryv1.Endpoint, 0, 8), sl.Endpoints...)
	n := node("n1")
	n.ManagedFields = mf
	n.Labels = map[string]string{corev1.LabelTopologyZone: "z1"}
	n.Annotations = map[string]string{"node.alpha.kubernetes.io/ttl": "0"}
	n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.5"}}
	n.Status.Images = []corev1.ContainerImage{{Names: []string{"registry/big:1"}, SizeBytes: 1 << 30}}

	n.Labels["kubernetes.io/hostname"] = "n1"
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "kubelet is posting ready status"}}
	// Another node, of which only the name and addresses are read.
	other := node("n2")
	other.Labels = map[string]string{corev1.LabelTopologyZone: "z2"}
	other.Spec.Taints = n.Spec.Taints
	other.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.6"}, {Type: corev1.NodeHostName, Address: "n2"}}
	other.Status.Images = n.Status.Images

	before := model.Input{Services: []*corev1.Service{svc.DeepCopy()}, Slices: []*discoveryv1.EndpointSlice{sl.DeepCopy()},
		Nodes: []*corev1.Node{n.DeepCopy(), other.DeepCopy()}, NodeName: "n1"}
	trim := newTrim("n1")
	var trimmed []any
	for _, o := range []any{svc, sl, n, other} {
		out, err := trim(o)
		if err != nil {
			t.Fatal(err)
		}
		trimmed = append(trimmed, out)
	}
	n = trimmed[2].(*corev1.Node)
	wantOther := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Addresses: other.Status.Addresses}}
	if got := trimmed[3].(*corev1.Node); !reflect.DeepEqual(got, wantOther) {
		t.Errorf("another node trimmed to %+v, want its name and addresses alone", got)
	}
	if again, _ := trim(n); !reflect.DeepEqual(again, n) {
		t.Errorf("trimming a trimmed Node changed it: %+v", again)
	}
	if !reflect.DeepEqual(n.Labels, map[string]string{corev1.LabelTopologyZone: "z1"}) || n.Status.Conditions != nil {
		t.Errorf("this node kept %v and %v, want the zone label alone and no conditions", n.Labels, n.Status.Conditions)
	}
	if svc.ManagedFields != nil || svc.Annotations != nil || sl.ManagedFields != nil || n.ManagedFields != nil || n.Status.Images != nil || n.Annotations != nil {
		t.Errorf("left what nobody reads: %+v %+v %+v", svc.ObjectMeta, sl.ObjectMeta, n)
	}
	if svc.Labels != nil || svc.Spec.Selector != nil || sl.OwnerReferences != nil || sl.GenerateName != "" ||
		!reflect.DeepEqual(sl.Labels, map[string]string{discoveryv1.LabelServiceName: "web"}) {
		t.Errorf("left labels, selector or owner nobody reads: Service %v %v, slice %v %v %q", svc.Labels, svc.Spec.Selector, sl.Labels, sl.OwnerReferences, sl.GenerateName)
	}
	for i, e := range sl.Endpoints {
		if e.TargetRef != nil || e.Hostname != nil || e.DeprecatedTopology != nil {
			t.Errorf("endpoint %d kept targetRef, hostname or deprecatedTopology: %+v", i, e)
		}
	}
	if cap(sl.Endpoints) != len(sl.Endpoints) {
		t.Errorf("endpoints hold an array of %d for %d: the decoder's spare capacity stays in the cache", cap(sl.Endpoints), len(sl.Endpoints))
	}
	if !reflect.DeepEqual(sl.Annotations, map[string]string{corev1.EndpointsLastChangeTriggerTime: when}) {
		t.Errorf("slice annotations %v, want the trigger time alone", sl.Annotations)
	}
	after := before
	after.Services, after.Slices, after.Nodes = []*corev1.Service{svc}, []*discoveryv1.EndpointSlice{sl}, []*corev1.Node{n, trimmed[3].(*corev1.Node)}
	st1, p1 := servicemap.Build(before)
	st2, p2 := servicemap.Build(after)
	for k, fe := range st1 {
		if len(fe.Backends) != 1 {
			t.Fatalf("test setup: %s has backends %v, want the one in zone z1", k, fe.Backends)
		}
	}
	if len(st1) == 0 || !reflect.DeepEqual(st1, st2) || !reflect.DeepEqual(p1, p2) {
		t.Errorf("Build differs after trim:\n%+v\n%+v", st1, st2)
	}
	if h1, h2 := servicemap.HealthChecks(before), servicemap.HealthChecks(after); len(h1) == 0 || !reflect.DeepEqual(h1, h2) {
		t.Errorf("health checks differ after trim: %+v, %+v", h1, h2)
	}
	if !reflect.DeepEqual(n.Spec.Taints, before.Nodes[0].Spec.Taints) {
		t.Errorf("taints (read by /healthz) lost")
	}
	r1, p1 := servicemap.RemoteNodeAddresses(before)
	r2, p2 := servicemap.RemoteNodeAddresses(after)
	if len(r1) == 0 || !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(p1, p2) {
		t.Errorf("remote node addresses differ after trim: %v, %v", r1, r2)
	}
}
func ptr[T any](v T) *T { return &v }

// TestTrimSharesRepeatedValues: two objects decoded apart hold the same
// condition, node, zone, port and enum values in one allocation after the
// transform, with every value unchanged, and the labels socklb reads kept.
func TestTrimSharesRepeatedValues(t *testing.T) {
	trim := newTrim("n1")
	var svcs []*corev1.Service
	var sls []*discoveryv1.EndpointSlice
	for _, name := range []string{"a", "b"} {
		s := testkit.Service("default/"+name, "10.96.0.10", testkit.ServicePort("http", corev1.ProtocolTCP, 80))
		s.Labels = map[string]string{model.LabelServiceProxyName: "other", "app": name}
		s.Spec.IPFamilyPolicy = ptr(corev1.IPFamilyPolicySingleStack)
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyCluster)
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		sl := testkit.EndpointSlice("default/"+name+"-x", name, discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{testkit.EndpointPort("http", corev1.ProtocolTCP, 8080)},
			testkit.Endpoint("10.244.1.11", ptr(true), ptr(true), ptr(false)))
		sl.Endpoints[0].NodeName, sl.Endpoints[0].Zone = ptr("n1"), ptr("z1")
		// Decoded apart, as the informer gets them: nothing shared yet.
		s, sl = s.DeepCopy(), sl.DeepCopy()
		want, wantSl := s.DeepCopy(), sl.DeepCopy()
		want.Labels = map[string]string{model.LabelServiceProxyName: "other"}
		wantSl.Labels = map[string]string{discoveryv1.LabelServiceName: name}
		if _, err := trim(s); err != nil {
			t.Fatal(err)
		}
		if _, err := trim(sl); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s, want) || !reflect.DeepEqual(sl, wantSl) {
			t.Fatalf("the transform changed a value:\n%+v\n%+v\nwant\n%+v\n%+v", s, sl, want, wantSl)
		}
		svcs, sls = append(svcs, s), append(sls, sl)
	}
	a, b := sls[0], sls[1]
	ea, eb := a.Endpoints[0], b.Endpoints[0]
	for what, same := range map[string]bool{
		"ready":           ea.Conditions.Ready == eb.Conditions.Ready,
		"serving":         ea.Conditions.Serving == eb.Conditions.Serving,
		"terminating":     ea.Conditions.Terminating == eb.Conditions.Terminating,
		"nodeName":        ea.NodeName == eb.NodeName,
		"zone":            ea.Zone == eb.Zone,
		"port name":       a.Ports[0].Name == b.Ports[0].Name,
		"port protocol":   a.Ports[0].Protocol == b.Ports[0].Protocol,
		"ipFamilyPolicy":  svcs[0].Spec.IPFamilyPolicy == svcs[1].Spec.IPFamilyPolicy,
		"internalTraffic": svcs[0].Spec.InternalTrafficPolicy == svcs[1].Spec.InternalTrafficPolicy,
		"service port protocol": unsafe.StringData(string(svcs[0].Spec.Ports[0].Protocol)) ==
			unsafe.StringData(string(svcs[1].Spec.Ports[0].Protocol)),
		"clusterIP and clusterIPs[0]": unsafe.StringData(svcs[0].Spec.ClusterIP) == unsafe.StringData(svcs[0].Spec.ClusterIPs[0]),
	} {
		if !same {
			t.Errorf("%s: two allocations of one value after the transform", what)
		}
	}
}

// TestInternerStopsAtItsBound: past maxInterned distinct values the table
// stops growing and values still come back unchanged.
func TestInternerStopsAtItsBound(t *testing.T) {
	in := newInterner()
	for i := range maxInterned + 100 {
		v := fmt.Sprint("port-", i)
		if got := *sharedPtr(in, &v); got != v {
			t.Fatalf("value %q came back as %q", v, got)
		}
	}
	if len(in.vals) != maxInterned {
		t.Errorf("table holds %d values, want its bound %d", len(in.vals), maxInterned)
	}
}
