package agent

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
)

type nopApplier struct{}

func (nopApplier) Apply(servicemap.State) datapath.ApplyResult { return datapath.ApplyResult{} }

func bigSnapshot(n int) servicemap.Input {
	in := servicemap.Input{NodeName: "node-a"}
	proto, port, name := corev1.ProtocolTCP, int32(8080), "http"
	ready := true
	for i := 0; i < n; i++ {
		svcName := fmt.Sprintf("svc-%d", i)
		in.Services = append(in.Services, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: svcName, ResourceVersion: "1", UID: "u"},
			Spec: corev1.ServiceSpec{ClusterIP: fmt.Sprintf("10.%d.%d.%d", 96+i/62500, (i/250)%250, i%250+1),
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		})
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: svcName + "-abc", ResourceVersion: "1", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
		}
		for j := 0; j < 10; j++ {
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", 100+i/65000, (i/250)%250, 10*(i%25)+j)},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
		}
		in.Slices = append(in.Slices, sl)
	}
	return in
}

// BenchmarkSyncOneChange is the agent's side of one EndpointSlice change
// with N Services in place (the datapath only records the delta): it
// should not grow with N.
func BenchmarkSyncOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			in := bigSnapshot(n)
			src := newFakeTracked(in)
			a := &Agent{Source: src, Datapath: &deltaApplier{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Health: NewHealth(time.Minute), Metrics: NewMetrics(), started: time.Now()}
			a.sync(true)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sl := in.Slices[i%n].DeepCopy()
				sl.ResourceVersion = fmt.Sprint(i + 2)
				sl.Endpoints = sl.Endpoints[:1+i%10]
				nn := types.NamespacedName{Namespace: sl.Namespace, Name: sl.Labels[discoveryv1.LabelServiceName]}
				src.put(nn, servicemap.ServiceObjects{Service: in.Services[i%n], Slices: []*discoveryv1.EndpointSlice{sl}})
				a.sync(false)
			}
		})
	}
}

// BenchmarkFullSync is the periodic resync (and the first sync) at N
// Services: a rebuild of every Service and a diff of every frontend.
func BenchmarkFullSync(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src := newFakeTracked(bigSnapshot(n))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				a := &Agent{Source: src, Datapath: &deltaApplier{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
					Health: NewHealth(time.Minute), Metrics: NewMetrics(), started: time.Now()}
				a.sync(true)
			}
		})
	}
}
