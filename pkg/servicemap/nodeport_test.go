package servicemap

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestBuildNodePort(t *testing.T) {
	one := []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))}
	runBuildCases(t, []buildCase{
		{
			name:     "NodePort Service: its ClusterIP, and the nodePort on every node address",
			services: []*corev1.Service{nodePortSvc()},
			slices:   one,
			local:    []string{"192.168.1.5", "10.1.0.5"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.1.0.5:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"192.168.1.5:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "NodePort on 127.0.0.1 even with no interface address known",
			services: []*corev1.Service{nodePortSvc()},
			slices:   one,
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "NodePort filtered by nodeport-addresses: only inside the prefixes, and no localhost",
			services: []*corev1.Service{nodePortSvc()},
			slices:   one,
			local:    []string{"192.168.1.5", "10.1.0.5", "10.2.0.5"},
			filter:   []string{"10.1.0.0/24", "10.2.0.5/32"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.1.0.5:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.2.0.5:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "nodeport-addresses covering 127.0.0.0/8 keeps localhost NodePorts",
			services: []*corev1.Service{nodePortSvc()},
			local:    []string{"192.168.1.5", "10.1.0.5"},
			filter:   []string{"127.0.0.0/8", "10.1.0.0/24"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
		},
		{
			name:     "nodeport-addresses of one family leaves the other family unfiltered",
			services: []*corev1.Service{withType(svc("default/web", "10.96.0.10,fd00::10", withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeNodePort)},
			local:    []string{"10.1.0.5", "2001:db8::5", "2001:db8:1::5"},
			filter:   []string{"2001:db8::/64"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"[::]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::5]:30080/TCP NodePort default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "nodeport-addresses that match nothing: no NodePort on this node, only the remote-node wildcard",
			services: []*corev1.Service{nodePortSvc()},
			local:    []string{"10.1.0.5"},
			filter:   []string{"172.16.0.0/12"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "::1, link-local, multicast, unspecified and broadcast addresses never serve NodePorts",
			services: []*corev1.Service{withType(svc("default/web", "10.96.0.10,fd00::10", withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeNodePort)},
			local: []string{"::1", "fe80::1", "169.254.1.1", "224.0.0.1", "ff02::1", "0.0.0.0", "::",
				"255.255.255.255", "2001:db8::5"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"[::]:30080/TCP NodePort default/web:http -> []",
				"[2001:db8::5]:30080/TCP NodePort default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "other IPv4 loopback interface addresses serve NodePorts like 127.0.0.1",
			services: []*corev1.Service{nodePortSvc()},
			local:    []string{"127.0.0.1", "127.0.1.1"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"127.0.1.1:30080/TCP NodePort default/web:http -> []",
			},
		},
		{
			name:     "this Node's InternalIP and ExternalIP serve NodePorts; its Hostname and other Nodes do not",
			services: []*corev1.Service{nodePortSvc()},
			nodes: []*corev1.Node{
				node("node-a", "zone-a", "InternalIP=10.1.0.5", "ExternalIP=198.51.100.5", "Hostname=node-a", "InternalDNS=node-a.local"),
				node("node-b", "zone-a", "InternalIP=10.1.0.6"),
			},
			nodeName: "node-a",
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"198.51.100.5:30080/TCP NodePort default/web:http -> []",
			},
		},
		{
			name:     "an address both on an interface and on the Node object, or mapped, is one frontend",
			services: []*corev1.Service{nodePortSvc()},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=10.1.0.5", "ExternalIP=::ffff:10.1.0.5")},
			nodeName: "node-a",
			local:    []string{"10.1.0.5", "::ffff:10.1.0.5", "127.0.0.1"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
		},
		{
			name:     "Node object addresses are filtered by nodeport-addresses too",
			services: []*corev1.Service{nodePortSvc()},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=10.1.0.5", "ExternalIP=198.51.100.5")},
			nodeName: "node-a",
			filter:   []string{"10.0.0.0/8"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "an unparsable Node address is a problem and skipped",
			services: []*corev1.Service{nodePortSvc()},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=10.1.0.500")},
			nodeName: "node-a",
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
			problems: []string{`Node node-a: status.addresses[0] (InternalIP) "10.1.0.500" is not an IP address`},
		},
		{
			name:     "single-stack IPv4 NodePort is not served on IPv6 node addresses",
			services: []*corev1.Service{nodePortSvc()},
			local:    []string{"2001:db8::5"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
		},
		{
			name: "single-stack IPv6 NodePort: IPv6 node addresses only, and no localhost",
			services: []*corev1.Service{withType(svc("default/web", "fd00::10",
				withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeNodePort)},
			slices: []*discoveryv1.EndpointSlice{v6("default/web-1", "web", httpPort, ready("fd00:1::1"))},
			local:  []string{"10.1.0.5", "2001:db8::5", "::1"},
			want: []string{
				"[::]:30080/TCP NodePort default/web:http -> [[fd00:1::1]:8080]",
				"[2001:db8::5]:30080/TCP NodePort default/web:http -> [[fd00:1::1]:8080]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> [[fd00:1::1]:8080]",
			},
		},
		{
			name: "UDP and TCP ports each get their nodePort; a port without one gets none",
			services: []*corev1.Service{withType(svc("kube-system/dns", "10.96.0.53",
				withNodePort(sport("dns", udp, 53), 30053), withNodePort(sport("dns-tcp", tcp, 53), 30053), sport("metrics", tcp, 9153)),
				corev1.ServiceTypeNodePort)},
			want: []string{
				"0.0.0.0:30053/TCP NodePort kube-system/dns:dns-tcp -> []",
				"0.0.0.0:30053/UDP NodePort kube-system/dns:dns -> []",
				"10.96.0.53:53/TCP ClusterIP kube-system/dns:dns-tcp -> []",
				"10.96.0.53:53/UDP ClusterIP kube-system/dns:dns -> []",
				"10.96.0.53:9153/TCP ClusterIP kube-system/dns:metrics -> []",
				"127.0.0.1:30053/TCP NodePort kube-system/dns:dns-tcp -> []",
				"127.0.0.1:30053/UDP NodePort kube-system/dns:dns -> []",
			},
		},
		{
			name: "LoadBalancer Service with nodePorts serves them; with nodePort 0 (allocateLoadBalancerNodePorts false) not",
			services: []*corev1.Service{
				withType(svc("default/lb", "10.96.0.11", withNodePort(sport("", tcp, 80), 30081)), corev1.ServiceTypeLoadBalancer),
				withType(svc("default/lb-no-np", "10.96.0.12", sport("", tcp, 80)), corev1.ServiceTypeLoadBalancer),
			},
			want: []string{
				"0.0.0.0:30081/TCP NodePort default/lb: -> []",
				"10.96.0.11:80/TCP ClusterIP default/lb: -> []",
				"10.96.0.12:80/TCP ClusterIP default/lb-no-np: -> []",
				"127.0.0.1:30081/TCP NodePort default/lb: -> []",
			},
		},
		{
			name:     "nodePort on a ClusterIP Service is a problem and not served",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", withNodePort(sport("http", tcp, 80), 30080))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`port "http" has nodePort 30080 but spec.type is not NodePort or LoadBalancer`},
		},
		{
			name: "nodePort out of range is a problem; the ClusterIP is still served",
			services: []*corev1.Service{withType(svc("default/web", "10.96.0.10",
				withNodePort(sport("http", tcp, 80), 70000)), corev1.ServiceTypeNodePort)},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`port "http" has nodePort 70000; it must be 1-65535 (fix spec.ports[0].nodePort)`},
		},
		{
			name: "nodePort 65535 is served; 65536 is out of range",
			services: []*corev1.Service{withType(svc("default/web", "10.96.0.10",
				withNodePort(sport("top", tcp, 80), 65535), withNodePort(sport("over", tcp, 81), 65536)), corev1.ServiceTypeNodePort)},
			want: []string{
				"0.0.0.0:65535/TCP NodePort default/web:top -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:top -> []",
				"10.96.0.10:81/TCP ClusterIP default/web:over -> []",
				"127.0.0.1:65535/TCP NodePort default/web:top -> []",
			},
			problems: []string{`port "over" has nodePort 65536; it must be 1-65535 (fix spec.ports[1].nodePort)`},
		},
		{
			name:     "NodePort frontends of a headless or ExternalName Service do not exist",
			services: []*corev1.Service{withType(svc("default/web", "None", withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeNodePort)},
		},
	})
}

// TestNodePortIsOneFrontendPerPort: however many addresses the node serves
// NodePorts on, a Service port's NodePort is one frontend per family at
// the unspecified address (and, under externalTrafficPolicy Local, its
// twin there, marked LocalNodeOnly), so the maps take a NodePort once per
// port: what renderServed expands to every node address in the other
// cases is here as Build gives it.
func TestNodePortIsOneFrontendPerPort(t *testing.T) {
	two := sport("dns", udp, 53)
	two.NodePort = 30053
	svcs := []*corev1.Service{
		withType(svc("default/web", "10.96.0.10,fd00::10", withNodePort(sport("http", tcp, 80), 30080), two), corev1.ServiceTypeNodePort),
		withETP(withType(svc("default/loc", "10.96.0.11", withNodePort(sport("http", tcp, 80), 30081)), corev1.ServiceTypeNodePort), corev1.ServiceExternalTrafficPolicyLocal),
	}
	in := buildCase{services: svcs, local: []string{"192.168.1.5", "10.1.0.5", "10.2.0.5", "2001:db8::5", "2001:db8::6"}}.input()
	st, ps := Build(in)
	checkInvariants(t, in, st, ps)
	want := []string{
		"0.0.0.0:30053/UDP NodePort default/web:dns -> []",
		"0.0.0.0:30080/TCP NodePort default/web:http -> []",
		"0.0.0.0:30081/TCP NodePort default/loc:http -> [] local-node-only",
		"0.0.0.0:30081/TCP/external NodePort default/loc:http -> [] local-node-only",
		"10.96.0.10:53/UDP ClusterIP default/web:dns -> []",
		"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
		"10.96.0.11:80/TCP ClusterIP default/loc:http -> []",
		"[::]:30053/UDP NodePort default/web:dns -> []",
		"[::]:30080/TCP NodePort default/web:http -> []",
		"[fd00::10]:53/UDP ClusterIP default/web:dns -> []",
		"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
	}
	got := render(st)
	for i, line := range got {
		k := strings.Fields(line)[0]
		for key, fe := range st {
			if key.String() == k && fe.LocalNodeOnly {
				got[i] += " local-node-only"
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("state:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	if len(ps) != 0 {
		t.Errorf("problems: %v", renderProblems(ps))
	}
}
