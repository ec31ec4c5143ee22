package servicemap

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestBuildLingering: which endpoints keep the sockets already sent to
// them, beside kube-proxy's conntrack cleanup (pkg/proxy/conntrack,
// TestCleanStaleEntries and TestServiceWithoutEndpoints): a flow survives
// while its endpoint serves, whatever the traffic policies, topology or
// terminating status say (Lingering holds those Backends leaves out), and
// goes once it stops serving, also when no endpoint serves at all.
func TestBuildLingering(t *testing.T) {
	cases := []struct {
		name     string
		services []*corev1.Service
		slices   []*discoveryv1.EndpointSlice
		want     []string // frontends that have lingering endpoints
	}{
		{
			name:     "every serving endpoint is a backend: nothing lingers (TestCleanStaleEntries: endpoints unchanged)",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"), ready("10.0.0.2"))},
		},
		{
			name:     "an endpoint starts terminating while another is ready: its sockets stay",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"), servingTerminating("10.0.0.2"))},
			want:     []string{"10.96.0.10:80/TCP -> [10.0.0.1:8080] lingering [10.0.0.2:8080]"},
		},
		{
			name:     "an endpoint that stopped serving: its sockets go (kube-proxy: not a serving endpoint, its flows are cleared)",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"), terminatingNotServing("10.0.0.2"), notReady("10.0.0.3"))},
		},
		{
			name:     "no endpoint serves: nothing lingers, every socket goes (TestServiceWithoutEndpoints)",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, terminatingNotServing("10.0.0.1"))},
		},
		{
			name:     "internalTrafficPolicy Local: the remote endpoints the ClusterIP no longer offers keep their sockets",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", ready("10.0.0.1")), on("node-b", ready("10.0.0.2")))},
			want: []string{"10.96.0.10:80/TCP -> [10.0.0.1:8080] lingering [10.0.0.2:8080]"},
		},
		{
			name:     "topology hints: the other zone's endpoints keep their sockets",
			services: []*corev1.Service{withTrafficDistribution(web(), corev1.ServiceTrafficDistributionPreferSameZone)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoneHints(ready("10.0.0.1"), "zone-a"), zoneHints(ready("10.0.0.2"), "zone-b"))},
			want: []string{"10.96.0.10:80/TCP -> [10.0.0.1:8080] lingering [10.0.0.2:8080]"},
		},
		{
			name: "externalTrafficPolicy Local: the twin's remote endpoints keep their sockets, the ScopeAny frontend has them all",
			services: []*corev1.Service{withETP(withType(svc("default/web", "10.96.0.10", withNodePort(sport("http", tcp, 80), 30080)),
				corev1.ServiceTypeNodePort), corev1.ServiceExternalTrafficPolicyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", ready("10.0.0.1")), on("node-b", ready("10.0.0.2")))},
			want: []string{"0.0.0.0:30080/TCP/external -> [10.0.0.1:8080] lingering [10.0.0.2:8080]"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bc := buildCase{services: tc.services, slices: tc.slices, nodes: nodeA(), nodeName: "node-a", local: []string{"10.1.0.5"}}
			in := bc.input()
			st, ps := Build(in)
			checkInvariants(t, in, st, ps)
			var got []string
			for k, fe := range st {
				if len(fe.Lingering) > 0 {
					got = append(got, fmt.Sprintf("%s -> %v lingering %v", k, fe.Backends, fe.Lingering))
				}
				for _, b := range fe.Lingering {
					if slices.Contains(fe.Backends, b) {
						t.Errorf("%s: %s is both a backend and lingering", k, b)
					}
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("lingering:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
		})
	}
}
