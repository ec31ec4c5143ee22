package servicemap

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/socklb/socklb/pkg/model"
)

// localLB is web as a LoadBalancer with externalTrafficPolicy Local and
// healthCheckNodePort 32000.
func localLB(ips string) *corev1.Service {
	s := withType(svc("default/web", ips, withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeLoadBalancer)
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	s.Spec.HealthCheckNodePort = 32000
	return s
}

// TestHealthChecks: which Services get kube-proxy's health check server
// (NeedsHealthCheck, pkg/api/v1/service/util.go), where it listens
// (newServiceHealthServer, pkg/proxy/healthcheck/service_health.go) and
// what it counts (EndpointsMap.LocalReadyEndpoints,
// pkg/proxy/endpointschangetracker.go).
func TestHealthChecks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		services []*corev1.Service
		slices   []*discoveryv1.EndpointSlice
		local    []string
		filter   []string
		want     []string
	}{
		{
			name:     "LoadBalancer, Local: counts this node's ready endpoints by IP, on all addresses",
			services: []*corev1.Service{localLB("10.96.0.10")},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", eports(eport("http", tcp, 8080), eport("metrics", tcp, 9090)),
					on("node-a", ready("10.0.0.1")), on("node-a", ready("10.0.0.2")), on("node-b", ready("10.0.0.3")),
					on("node-a", notReady("10.0.0.4")), on("node-a", servingTerminating("10.0.0.5"))),
			},
			want: []string{"default/web v4 :32000 on [0.0.0.0] local 2"},
		},
		{
			name:     "no local ready endpoint: 0",
			services: []*corev1.Service{localLB("10.96.0.10")},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, on("node-b", ready("10.0.0.3")), on("node-a", servingTerminating("10.0.0.5")))},
			want:     []string{"default/web v4 :32000 on [0.0.0.0] local 0"},
		},
		{
			name:     "copies of one ip:port in two slices: one IP, ready if the kept copy is",
			services: []*corev1.Service{localLB("10.96.0.10")},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, on("node-a", ready("10.0.0.1"))),
				v4("default/web-b", "web", httpPort, on("node-a", notReady("10.0.0.1"))),
			},
			want: []string{"default/web v4 :32000 on [0.0.0.0] local 1"},
		},
		{
			name:     "dual-stack: one per family, each counting its own family",
			services: []*corev1.Service{localLB("10.96.0.10,fd00::10")},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-4", "web", httpPort, on("node-a", ready("10.0.0.1"))),
				v6("default/web-6", "web", httpPort, on("node-a", ready("fd00:1::1")), on("node-a", ready("fd00:1::2"))),
			},
			want: []string{"default/web v4 :32000 on [0.0.0.0] local 1", "default/web v6 :32000 on [::] local 2"},
		},
		{
			name:     "--nodeport-addresses filters a family: the interface addresses inside it",
			services: []*corev1.Service{localLB("10.96.0.10,fd00::10")},
			local:    []string{"127.0.0.1", "10.1.0.5", "192.168.1.5", "::1", "fe80::1", "2001:db8::5"},
			filter:   []string{"127.0.0.0/8", "::1/128", "fe80::/10"},
			want:     []string{"default/web v4 :32000 on [127.0.0.1] local 0", "default/web v6 :32000 on [::1] local 0"},
		},
		{
			name:     "a zero CIDR among others matches all",
			services: []*corev1.Service{localLB("10.96.0.10")},
			local:    []string{"10.1.0.5"},
			filter:   []string{"10.0.0.0/8", "0.0.0.0/0"},
			want:     []string{"default/web v4 :32000 on [0.0.0.0] local 0"},
		},
		{
			name: "healthCheckNodePort 65535 is served; 65536 is not",
			services: func() []*corev1.Service {
				top, over := localLB("10.96.0.11"), localLB("10.96.0.12")
				top.Name, top.Spec.HealthCheckNodePort = "top", 65535
				over.Name, over.Spec.HealthCheckNodePort = "over", 65536
				return []*corev1.Service{top, over}
			}(),
			want: []string{"default/top v4 :65535 on [0.0.0.0] local 0"},
		},
		{
			name: "externalTrafficPolicy Cluster, a NodePort Service, no healthCheckNodePort, another proxy's Service: none",
			services: func() []*corev1.Service {
				cluster := localLB("10.96.0.11")
				cluster.Name, cluster.Spec.ExternalTrafficPolicy = "cluster", corev1.ServiceExternalTrafficPolicyCluster
				np := localLB("10.96.0.12")
				np.Name, np.Spec.Type = "np", corev1.ServiceTypeNodePort
				noPort := localLB("10.96.0.13")
				noPort.Name, noPort.Spec.HealthCheckNodePort = "noport", 0
				other := withLabel(localLB("10.96.0.14"), model.LabelServiceProxyName, "x")
				other.Name = "other"
				return []*corev1.Service{cluster, np, noPort, other}
			}(),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := model.Input{Services: tc.services, Slices: tc.slices, Nodes: nodeA(), NodeName: "node-a"}
			for _, a := range tc.local {
				in.LocalAddresses = append(in.LocalAddresses, netip.MustParseAddr(a))
			}
			for _, p := range tc.filter {
				in.NodePortAddresses = append(in.NodePortAddresses, netip.MustParsePrefix(p))
			}
			var got []string
			for _, hc := range HealthChecks(in) {
				fam := "v4"
				if hc.IPv6 {
					fam = "v6"
				}
				got = append(got, fmt.Sprintf("%s %s :%d on %v local %d", hc.Service, fam, hc.Port, hc.Addrs, hc.LocalEndpoints))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("health checks:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}
