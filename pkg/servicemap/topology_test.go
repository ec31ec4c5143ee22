package servicemap

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestBuildTopology: hints, as kube-proxy's topologyModeFromHints reads
// them. Every case runs on node-a in zone-a unless it says otherwise.
func TestBuildTopology(t *testing.T) {
	zoned := func(addr, zone string) discoveryv1.Endpoint { return zoneHints(ready(addr), zone) }
	// What the EndpointSlice controller writes for PreferSameNode: a node
	// hint and the zone hint of that node.
	sameNode := func(addr, node, zone string) discoveryv1.Endpoint {
		return on(node, zoneHints(nodeHints(ready(addr), node), zone))
	}
	runBuildCases(t, []buildCase{
		{
			name:     "PreferSameZone: only endpoints hinted for this node's zone",
			services: []*corev1.Service{withTrafficDistribution(web(), corev1.ServiceTrafficDistributionPreferSameZone)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b"), zoned("10.0.0.3", "zone-a"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.3:8080]"},
		},
		{
			name:     "PreferClose is PreferSameZone's old name: the same zone hints, the same choice",
			services: []*corev1.Service{withTrafficDistribution(web(), corev1.ServiceTrafficDistributionPreferClose)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "an endpoint hinted for several zones serves each of them",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoneHints(ready("10.0.0.1"), "zone-b", "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "PreferSameNode: only endpoints hinted for this node",
			services: []*corev1.Service{withTrafficDistribution(web(), corev1.ServiceTrafficDistributionPreferSameNode)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				sameNode("10.0.0.1", "node-a", "zone-a"), sameNode("10.0.0.2", "node-b", "zone-a"), sameNode("10.0.0.3", "node-c", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "PreferSameNode with no endpoint for this node falls back to the zone hints",
			services: []*corev1.Service{withTrafficDistribution(web(), corev1.ServiceTrafficDistributionPreferSameNode)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				sameNode("10.0.0.2", "node-b", "zone-a"), sameNode("10.0.0.3", "node-c", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]"},
		},
		{
			name:     "node hints on only some endpoints: node hints are ignored, zone hints still apply",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				sameNode("10.0.0.1", "node-a", "zone-a"), zoned("10.0.0.2", "zone-a"), zoned("10.0.0.3", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "node hints without zone hints, none for this node: every ready endpoint",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				nodeHints(ready("10.0.0.2"), "node-b"), nodeHints(ready("10.0.0.3"), "node-c"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080 10.0.0.3:8080]"},
		},
		{
			name:     "hints on only some endpoints: hints are ignored, every ready endpoint",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), ready("10.0.0.2"), zoned("10.0.0.3", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080 10.0.0.3:8080]"},
		},
		{
			name:     "hints across two slices count together: one unhinted endpoint in either disables them",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", httpPort, zoned("10.0.0.1", "zone-a")),
				v4("default/web-2", "web", httpPort, ready("10.0.0.2")),
			},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "zone hints, none for this zone: every ready endpoint",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.2", "zone-b"), zoned("10.0.0.3", "zone-c"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080 10.0.0.3:8080]"},
		},
		{
			name:     "only ready endpoints decide: an unhinted not-ready endpoint does not disable hints",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), notReady("10.0.0.2"), zoned("10.0.0.3", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "this zone's endpoints are terminating: the ready ones of other zones, not the draining ones here",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoneHints(servingTerminating("10.0.0.1"), "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]"},
		},
		{
			name:     "all endpoints terminating: hints are ignored, every serving-terminating endpoint",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoneHints(servingTerminating("10.0.0.1"), "zone-a"), zoneHints(servingTerminating("10.0.0.2"), "zone-b"),
				zoneHints(terminatingNotServing("10.0.0.3"), "zone-a"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "trafficDistribution without hints changes nothing: kube-proxy reads only hints",
			services: []*corev1.Service{withTrafficDistribution(web(), corev1.ServiceTrafficDistributionPreferSameNode)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", ready("10.0.0.1")), on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "hints without trafficDistribution (topology-mode annotation) are used",
			services: []*corev1.Service{withLabel(web(), "unrelated", "x")},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "node without a zone label: zone hints never match",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodes: []*corev1.Node{node("node-a", "")}, nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "an empty zone hint does not match a node without a zone label",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", ""), zoned("10.0.0.2", "zone-b"))},
			nodes: []*corev1.Node{node("node-a", "")}, nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "only this node's Node object gives the zone, not another node's",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodes: []*corev1.Node{node("node-b", "zone-b"), node("node-a", "zone-a")}, nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "no Node object: no zone, hints ignored",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodeName: "node-a",
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "no node name: node hints for an empty name never match",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				nodeHints(ready("10.0.0.1"), ""), nodeHints(ready("10.0.0.2"), "node-b"))},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "topology is decided per family: IPv4 hinted, IPv6 not",
			services: []*corev1.Service{svc("default/web", "10.96.0.10,fd00::10", sport("http", tcp, 80))},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", httpPort, zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b")),
				v6("default/web-2", "web", httpPort, zoned("fd00:1::1", "zone-a"), ready("fd00:1::2")),
			},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> [[fd00:1::1]:8080 [fd00:1::2]:8080]",
			},
		},
		{
			name:     "topology applies to external frontends too",
			services: []*corev1.Service{withExternalIPs(web(), "192.0.2.10")},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				zoned("10.0.0.1", "zone-a"), zoned("10.0.0.2", "zone-b"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
			},
		},
	})
}
