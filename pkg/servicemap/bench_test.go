package servicemap

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// bigInput is n Services of one TCP port, each with 10 ready endpoints.
func bigInput(n int) model.Input {
	in := model.Input{NodeName: "node-a"}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("svc-%d", i)
		in.Services = append(in.Services, svc("default/"+name, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1), sport("http", corev1.ProtocolTCP, 80)))
		var eps []discoveryv1.Endpoint
		for j := 0; j < 10; j++ {
			eps = append(eps, ready(fmt.Sprintf("10.%d.%d.%d", 100+i/65000, (i/250)%250, 10*(i%25)+j)))
		}
		in.Slices = append(in.Slices, v4("default/"+name+"-abc", name, eports(eport("http", corev1.ProtocolTCP, 8080)), eps...))
	}
	return in
}

// BenchmarkBuild is the cost of one full rebuild, which every sync pays.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in := bigInput(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				st, _ := Build(in)
				if len(st) != n {
					b.Fatalf("%d frontends", len(st))
				}
			}
		})
	}
}

// BenchmarkTrackerOneChange is servicemap's side of one EndpointSlice
// change with N Services in place: Tracker.Update of that Service alone.
func BenchmarkTrackerOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in := bigInput(n)
		var tr Tracker
		tr.Full(in)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				svc := in.Services[i%n]
				changed := in.Slices[i%n].DeepCopy()
				changed.Endpoints = changed.Endpoints[:9-(i/n)%2]
				nn := nnOf(svc.Namespace, svc.Name)
				d, _, ok := tr.Update(model.Input{NodeName: in.NodeName, Nodes: in.Nodes},
					map[types.NamespacedName]ServiceObjects{nn: {Service: svc, Slices: []*discoveryv1.EndpointSlice{changed}}})
				if !ok || len(d.Upsert) != 1 && i > 1 {
					b.Fatalf("update %d: ok %v, %d frontends written", i, ok, len(d.Upsert))
				}
			}
		})
	}
}
