package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

type recordingHealthChecks chan []servicemap.HealthCheck

func (r recordingHealthChecks) Sync(hcs []servicemap.HealthCheck) { r <- hcs }

// TestAgentSyncsHealthChecks: every sync hands the health check server
// what servicemap.HealthChecks makes of the snapshot, as kube-proxy's
// syncProxyRules calls SyncServices and SyncEndpoints each time.
func TestAgentSyncsHealthChecks(t *testing.T) {
	src := newFakeSource()
	rec := make(recordingHealthChecks, 100)
	a, err := New(Config{
		Datapath: &fakeApplier{fail: map[string]bool{}, applied: make(chan servicemap.State, 100)},
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)), HealthTimeout: time.Minute,
		HealthChecks: rec, LocalAddresses: noAddresses,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })
	<-src.ready

	lb := service("lb", "10.96.0.10")
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = 32000
	slice := endpointSlice("lb", "1", time.Time{}, "10.0.0.1", "10.0.0.2")
	for i := range slice.Endpoints {
		slice.Endpoints[i].NodeName = testkit.Ptr("node-a")
	}
	src.set(func(in *model.Input) {
		in.Services = []*corev1.Service{lb}
		in.Slices = []*discoveryv1.EndpointSlice{slice}
	})
	deadline := time.After(5 * time.Second)
	for {
		select {
		case hcs := <-rec:
			if len(hcs) == 1 && hcs[0].Port == 32000 && hcs[0].LocalEndpoints == 2 && hcs[0].Service.Name == "lb" {
				return
			}
		case <-deadline:
			t.Fatal("the health check server never got default/lb on port 32000 with 2 local endpoints")
		}
	}
}
