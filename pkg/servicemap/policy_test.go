package servicemap

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

const (
	policyLocal   = corev1.ServiceInternalTrafficPolicyLocal
	policyCluster = corev1.ServiceInternalTrafficPolicyCluster
	extLocal      = corev1.ServiceExternalTrafficPolicyLocal
)

// TestBuildInternalTrafficPolicy: internalTrafficPolicy on ClusterIP frontends.
func TestBuildInternalTrafficPolicy(t *testing.T) {
	runBuildCases(t, []buildCase{
		{
			name:     "Local: only this node's endpoints",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", ready("10.0.0.1")), on("node-b", ready("10.0.0.2")), ready("10.0.0.3"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "Cluster, spelled out: every endpoint",
			services: []*corev1.Service{withITP(web(), policyCluster)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", ready("10.0.0.1")), on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "Local policy with only remote endpoints: PolicyDrop, no fallback to them",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-b", ready("10.0.0.2")), ready("10.0.0.3"))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [] drop"},
		},
		{
			name:     "Local policy with only remote serving-terminating endpoints: still PolicyDrop",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-b", servingTerminating("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [] drop"},
		},
		{
			name:     "Local with no endpoints at all: ECONNREFUSED, not PolicyDrop",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			nodes:    nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "Local with only unusable endpoints anywhere: ECONNREFUSED, not PolicyDrop",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", notReady("10.0.0.1")), on("node-b", terminatingNotServing("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "Local: the local endpoints are all terminating while remote ones are ready: the local terminating ones",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", servingTerminating("10.0.0.1")), on("node-a", terminatingNotServing("10.0.0.4")),
				on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "Local: a ready local endpoint hides the draining local ones",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", servingTerminating("10.0.0.1")), on("node-a", ready("10.0.0.3")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.3:8080]"},
		},
		{
			name:     "Local wins over topology hints: the local endpoint though hinted elsewhere",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", zoneHints(ready("10.0.0.1"), "zone-b")), on("node-b", zoneHints(ready("10.0.0.2"), "zone-a")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "Local without a node name: nothing is local, so PolicyDrop",
			services: []*corev1.Service{withITP(web(), policyLocal)},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [] drop"},
		},
		{
			name:     "Local applies to the ClusterIP only: external frontends keep the cluster-wide endpoints",
			services: []*corev1.Service{withExternalIPs(withITP(web(), policyLocal), "192.0.2.10")},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [] drop",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.2:8080]",
			},
		},
		{
			name: "dual-stack Service with single-stack slices: each family decides alone",
			services: []*corev1.Service{withITP(svc("default/web", "10.96.0.10,fd00::10",
				sport("http", tcp, 80)), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", ready("10.0.0.1")), on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name: "dual-stack Service, IPv6 endpoints only remote: IPv6 drops, IPv4 refuses",
			services: []*corev1.Service{withITP(svc("default/web", "10.96.0.10,fd00::10",
				sport("http", tcp, 80)), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v6("default/web-1", "web", httpPort, on("node-b", ready("fd00:1::2")))},
			nodes:  nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> [] drop",
			},
		},
		{
			name:     "unknown internalTrafficPolicy is a problem and Cluster is used",
			services: []*corev1.Service{withITP(web(), "Nearby")},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]"},
			problems: []string{`spec.internalTrafficPolicy "Nearby" is not Cluster or Local; Cluster is used`},
		},
	})
}

// TestBuildExternalTrafficPolicy: externalTrafficPolicy Local gives every
// external frontend a ScopeExternal twin for packets from other machines,
// with kube-proxy's Local endpoints (CategorizeEndpoints' localEndpoints)
// and DROP when there are endpoints but none here; the ScopeAny frontends,
// which serve the node's own sockets, keep the cluster-wide endpoints, as
// kube-proxy short-circuits traffic that starts on the node.
func TestBuildExternalTrafficPolicy(t *testing.T) {
	lbLocal := func() *corev1.Service {
		s := withType(svc("default/web", "10.96.0.10", withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeLoadBalancer)
		return withETP(withIngress(withExternalIPs(s, "192.0.2.10"), ingress("203.0.113.7", nil)), extLocal)
	}
	runBuildCases(t, []buildCase{
		{
			name:     "only remote endpoints: sockets use them everywhere, packets from outside are dropped on every external address but loopback",
			services: []*corev1.Service{lbLocal()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-b", ready("10.0.0.2")), on("node-c", ready("10.0.0.3")))},
			nodes: nodeA(), nodeName: "node-a", local: []string{"10.1.0.5"},
			want: []string{
				"10.1.0.5:30080/TCP NodePort default/web:http -> [10.0.0.2:8080 10.0.0.3:8080]",
				"10.1.0.5:30080/TCP/external NodePort default/web:http -> [] drop",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080 10.0.0.3:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.2:8080 10.0.0.3:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.2:8080 10.0.0.3:8080]",
				"192.0.2.10:80/TCP/external ExternalIP default/web:http -> [] drop",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.2:8080 10.0.0.3:8080]",
				"203.0.113.7:80/TCP/external LoadBalancer default/web:http -> [] drop",
			},
		},
		{
			name:     "a local endpoint: the twins get it alone, the ScopeAny frontends every endpoint",
			services: []*corev1.Service{lbLocal()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", ready("10.0.0.1")), on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a", local: []string{"10.1.0.5"},
			want: []string{
				"10.1.0.5:30080/TCP NodePort default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]",
				"10.1.0.5:30080/TCP/external NodePort default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]",
				"192.0.2.10:80/TCP/external ExternalIP default/web:http -> [10.0.0.1:8080]",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]",
				"203.0.113.7:80/TCP/external LoadBalancer default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "both policies Local: the ClusterIP drops, the ScopeAny external frontends short-circuit, the twins drop",
			services: []*corev1.Service{withITP(lbLocal(), policyLocal)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [] drop",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.2:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.2:8080]",
				"192.0.2.10:80/TCP/external ExternalIP default/web:http -> [] drop",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.2:8080]",
				"203.0.113.7:80/TCP/external LoadBalancer default/web:http -> [] drop",
			},
		},
		{
			name:     "no usable endpoint anywhere: every frontend refuses, the twins too (REJECT, not DROP)",
			services: []*corev1.Service{lbLocal()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", notReady("10.0.0.1")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
				"192.0.2.10:80/TCP/external ExternalIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
				"203.0.113.7:80/TCP/external LoadBalancer default/web:http -> []",
			},
		},
		{
			name:     "only a remote serving-terminating endpoint: sockets use it (the Cluster fallback), packets from outside drop",
			services: []*corev1.Service{lbLocal()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-b", servingTerminating("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.2:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.2:8080]",
				"192.0.2.10:80/TCP/external ExternalIP default/web:http -> [] drop",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.2:8080]",
				"203.0.113.7:80/TCP/external LoadBalancer default/web:http -> [] drop",
			},
		},
		{
			name:     "the local endpoints all draining while a remote one is ready: the twins fall back to the local draining ones",
			services: []*corev1.Service{lbLocal()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", servingTerminating("10.0.0.1")), on("node-a", terminatingNotServing("10.0.0.4")),
				on("node-b", ready("10.0.0.2")))},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.2:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.2:8080]",
				"192.0.2.10:80/TCP/external ExternalIP default/web:http -> [10.0.0.1:8080]",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.2:8080]",
				"203.0.113.7:80/TCP/external LoadBalancer default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "twins ignore topology hints, as Local does: the local endpoint though hinted elsewhere",
			services: []*corev1.Service{withType(withETP(svc("default/web", "10.96.0.10", withNodePort(sport("http", tcp, 80), 30080)), extLocal), corev1.ServiceTypeNodePort)},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				on("node-a", zoneHints(ready("10.0.0.1"), "zone-b")), on("node-b", zoneHints(ready("10.0.0.2"), "zone-a")))},
			nodes: nodeA(), nodeName: "node-a", local: []string{"10.1.0.5"},
			want: []string{
				"10.1.0.5:30080/TCP NodePort default/web:http -> [10.0.0.2:8080]",
				"10.1.0.5:30080/TCP/external NodePort default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.2:8080]",
			},
		},
		{
			name: "dual-stack: a twin per family, each with its own family's local endpoints",
			services: []*corev1.Service{withETP(withType(svc("default/web", "10.96.0.10,fd00::10",
				withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeNodePort), extLocal)},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", httpPort, on("node-a", ready("10.0.0.1"))),
				v6("default/web-2", "web", httpPort, on("node-b", ready("fd00:1::2"))),
			},
			nodes: nodeA(), nodeName: "node-a", local: []string{"10.1.0.5", "2001:db8::5"},
			want: []string{
				"10.1.0.5:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.1.0.5:30080/TCP/external NodePort default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"[2001:db8::5]:30080/TCP NodePort default/web:http -> [[fd00:1::2]:8080]",
				"[2001:db8::5]:30080/TCP/external NodePort default/web:http -> [] drop",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> [[fd00:1::2]:8080]",
			},
		},
		{
			// kube-proxy's ExternalPolicyLocal (pkg/api/v1/service/util.go)
			// asks the type: NodePort, LoadBalancer, or ClusterIP with
			// externalIPs.
			name: "a ClusterIP Service with externalIPs honours Local; one with only LB ingress IPs does not",
			services: []*corev1.Service{
				withETP(withExternalIPs(svc("default/ext", "10.96.0.11", sport("http", tcp, 80)), "192.0.2.11"), extLocal),
				withETP(withIngress(svc("default/ing", "10.96.0.12", sport("http", tcp, 80)), ingress("203.0.113.8", nil)), extLocal),
			},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.11:80/TCP ClusterIP default/ext:http -> []",
				"10.96.0.12:80/TCP ClusterIP default/ing:http -> []",
				"192.0.2.11:80/TCP ExternalIP default/ext:http -> []",
				"192.0.2.11:80/TCP/external ExternalIP default/ext:http -> []",
				"203.0.113.8:80/TCP LoadBalancer default/ing:http -> []",
			},
		},
		{
			name: "a twin follows its frontend's claim: a Service that loses the address loses its twin, so sockets and packets meet one Service",
			services: []*corev1.Service{
				withExternalIPs(svc("default/aaa", "10.96.0.11", sport("x", tcp, 80)), "192.0.2.10"),
				withETP(withExternalIPs(svc("default/zzz", "10.96.0.12", sport("z", tcp, 80)), "192.0.2.10"), extLocal),
			},
			nodes: nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.11:80/TCP ClusterIP default/aaa:x -> []",
				"10.96.0.12:80/TCP ClusterIP default/zzz:z -> []",
				"192.0.2.10:80/TCP ExternalIP default/aaa:x -> []",
			},
			problems: []string{`Service default/zzz: 192.0.2.10:80/TCP (ExternalIP, port "z") is also claimed by Service default/aaa port "x" (ExternalIP), which wins as the smaller namespace/name`},
		},
		{
			name:     "unknown externalTrafficPolicy is a problem and Cluster is used",
			services: []*corev1.Service{withETP(withExternalIPs(web(), "192.0.2.10"), "Global")},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
			},
			problems: []string{`spec.externalTrafficPolicy "Global" is not Cluster or Local; Cluster is used`},
		},
	})
}
