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
)

type nopApplier struct{}

func (nopApplier) Apply(servicemap.State) datapath.ApplyResult { return datapath.ApplyResult{} }

func bigSnapshot(n int) model.Input {
	in := model.Input{NodeName: "node-a"}
	for i := 0; i < n; i++ {
		svcName := fmt.Sprintf("svc-%d", i)
		in.Services = append(in.Services, service(svcName, fmt.Sprintf("10.96.%d.%d", i/250, i%250+1)))
		ips := make([]string, 10)
		for j := range ips {
			ips[j] = fmt.Sprintf("10.%d.%d.%d", 100+i/65000, (i/250)%250, 10*(i%25)+j)
		}
		in.Slices = append(in.Slices, endpointSlice(svcName, "1", time.Time{}, ips...))
	}
	return in
}

// BenchmarkSyncOneChange is the agent's side of one EndpointSlice change
// with N Services in place (the datapath is a no-op here).
func BenchmarkSyncOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src := newFakeSource()
			src.in = bigSnapshot(n)
			a, err := New(Config{Datapath: nopApplier{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				HealthTimeout: time.Minute, HealthChecks: nopHealthChecks{}, LocalAddresses: noAddresses})
			if err != nil {
				b.Fatal(err)
			}
			a.src, a.started = src, time.Now()
			a.sync()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sl := src.in.Slices[i%n].DeepCopy()
				sl.ResourceVersion = fmt.Sprint(i + 2)
				src.in.Slices[i%n] = sl
				a.sync()
			}
		})
	}
}

type nopHealthChecks struct{}

func (nopHealthChecks) Sync([]servicemap.HealthCheck) {}
