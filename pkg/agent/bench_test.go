package agent

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

type nopApplier struct{}

func (nopApplier) Apply(servicemap.State) datapath.ApplyResult { return datapath.ApplyResult{} }

func bigSnapshot(n int) model.Input {
	in := model.Input{NodeName: "node-a"}
	for i := 0; i < n; i++ {
		svcName := fmt.Sprintf("svc-%d", i)
		// In 10.96.0.0/12: "10.96.<i/250>.x" made invalid addresses past
		// 64 000 Services, and a third of the 100 000 a problem.
		vip := 0x0a600000 + uint32(i) + 1
		in.Services = append(in.Services, service(svcName, fmt.Sprintf("%d.%d.%d.%d", vip>>24, vip>>16&0xff, vip>>8&0xff, vip&0xff)))
		ips := make([]string, 10)
		for j := range ips {
			ips[j] = fmt.Sprintf("10.%d.%d.%d", 100+i/65000, (i/250)%250, 10*(i%25)+j)
		}
		in.Slices = append(in.Slices, endpointSlice(svcName, "1", time.Time{}, ips...))
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
			a := newBenchAgent(b, src)
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
				a := newBenchAgent(b, src)
				a.sync(true)
			}
		})
	}
}

// newBenchAgent is an agent on src whose datapath only records deltas.
func newBenchAgent(b *testing.B, src source.Source) *Agent {
	a, err := New(Config{Datapath: &deltaApplier{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HealthTimeout: time.Minute, HealthChecks: nopHealthChecks{}, LocalAddresses: noAddresses})
	if err != nil {
		b.Fatal(err)
	}
	a.src, a.started = src, time.Now()
	return a
}

type nopHealthChecks struct{}

func (nopHealthChecks) Sync([]servicemap.HealthCheck) {}
