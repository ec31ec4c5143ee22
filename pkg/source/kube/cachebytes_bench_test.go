package kube

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BenchmarkInformerCacheBytes measures the heap the informer caches keep
// per Service and its EndpointSlice of 10 endpoints, shaped as the API
// server serves what a user and the EndpointSlice controller wrote:
// decoded from protobuf as the informers decode them, then kept as
// decoded (the baseline) and as the transform leaves them, in the same
// process. `make bench-informer` records its output.
func BenchmarkInformerCacheBytes(b *testing.B) {
	const n = 10000
	wire := make([][2][]byte, n)
	for i := range wire {
		s, err := controllerService(i).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		sl, err := controllerSlice(i).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		wire[i] = [2][]byte{s, sl}
	}
	keep := func(o any) (any, error) { return o, nil }
	var decoded, trimmed float64
	for b.Loop() {
		decoded = heapPerPair(b, wire, keep)
		trimmed = heapPerPair(b, wire, newTrim("node-1"))
	}
	b.ReportMetric(decoded, "decoded-B/svc+slice")
	b.ReportMetric(trimmed, "cached-B/svc+slice")
	b.ReportMetric(trimmed/decoded, "cached/decoded")
}

// heapPerPair decodes every pair, keeps what transform returns, and
// returns the live heap that holds, per pair.
func heapPerPair(b *testing.B, wire [][2][]byte, transform func(any) (any, error)) float64 {
	held := make([]any, 0, 2*len(wire))
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, w := range wire {
		s, sl := &corev1.Service{}, &discoveryv1.EndpointSlice{}
		if err := s.Unmarshal(w[0]); err != nil {
			b.Fatal(err)
		}
		if err := sl.Unmarshal(w[1]); err != nil {
			b.Fatal(err)
		}
		for _, o := range []any{s, sl} {
			out, err := transform(o)
			if err != nil {
				b.Fatal(err)
			}
			held = append(held, out)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(held)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(len(wire))
}

// controllerService is a ClusterIP Service as the API server stores a
// user's: labels, a selector, defaulted spec fields, managed fields.
func controllerService(i int) *corev1.Service {
	name := fmt.Sprintf("web-%d", i)
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, i>>8&255, i&255)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", 2*i)),
			ResourceVersion: fmt.Sprint(1_000_000 + 2*i), CreationTimestamp: metav1.NewTime(time.Unix(1_780_000_000, 0)),
			Labels:        map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1"}},
		},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Selector:        map[string]string{"app.kubernetes.io/name": name},
			Ports:           []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")}},
			SessionAffinity: corev1.ServiceAffinityNone, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			IPFamilyPolicy:        ptr(corev1.IPFamilyPolicySingleStack),
			InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster),
		},
	}
}

// controllerSlice is the EndpointSlice controller's slice of
// controllerService(i): 10 ready endpoints on 10 nodes, with their Pods.
func controllerSlice(i int) *discoveryv1.EndpointSlice {
	name := fmt.Sprintf("web-%d", i)
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-x7k2p", GenerateName: name + "-", Namespace: "shop", Generation: 1,
			UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", 2*i+1)), ResourceVersion: fmt.Sprint(1_000_001 + 2*i),
			CreationTimestamp: metav1.NewTime(time.Unix(1_780_000_000, 0)),
			Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop",
				discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name,
				UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", 2*i)), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for j := range 10 {
		pod := fmt.Sprintf("%s-%d", name, j)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+j, i>>8&255, i&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			NodeName:   ptr(fmt.Sprintf("node-%d", j)),
			Zone:       ptr(fmt.Sprintf("zone-%d", j%3)),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "shop", Name: pod, UID: types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", 10*i+j))},
		})
	}
	return s
}
