package servicemap

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

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

// BenchmarkBuildOneChange is a sync after one Service's slice changed, with
// the Cache the agent keeps.
func BenchmarkBuildOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		in := bigInput(n)
		var c Cache
		c.Build(in)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				old := in.Slices[i%n]
				changed := old.DeepCopy()
				changed.Endpoints = changed.Endpoints[:9]
				in.Slices[i%n] = changed
				st, _ := c.Build(in)
				if len(st[FrontendKey{Addr: netip.MustParseAddr(in.Services[i%n].Spec.ClusterIP), Port: 80, Proto: TCP}].Backends) != 9 {
					b.Fatal("the change was not applied")
				}
				in.Slices[i%n] = old
			}
		})
	}
}

// TestCacheFollowsChanges: a Cache kept across a sequence of snapshots
// gives, at every step, what a fresh Build gives.
func TestCacheFollowsChanges(t *testing.T) {
	in := bigInput(50)
	var c Cache
	steps := []func(){
		func() {},
		func() {
			in.Slices[3] = v4("default/svc-3-abc", "svc-3", eports(eport("http", corev1.ProtocolTCP, 8080)), ready("10.9.9.9"))
		},
		func() { s := in.Services[4].DeepCopy(); s.Spec.Ports[0].Port = 81; in.Services[4] = s },
		func() { in.Services = in.Services[1:] },
		func() {
			in.Slices = append(in.Slices, v4("default/svc-7-def", "svc-7", eports(eport("http", corev1.ProtocolTCP, 8080)), ready("10.9.9.10")))
		},
		func() { in.NodeName = "node-b" },
	}
	for i, step := range steps {
		step()
		want, wantP := Build(in)
		got, gotP := c.Build(in)
		if !statesEqual(want, got) || !slices.Equal(renderProblems(wantP), renderProblems(gotP)) {
			t.Fatalf("step %d: cache differs from Build:\n%q\n%q", i, render(want), render(got))
		}
	}
}
