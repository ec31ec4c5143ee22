package servicemap

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestExternalIPsOnlyOfNodes: CVE-2020-8554. By default an externalIP
// is captured only when it is an address of this node (an interface, or
// the Node object's InternalIP/ExternalIP), as Cilium's socket LB does, or
// another Node's InternalIP/ExternalIP (that node captures it anyway, for
// every packet that reaches it); --external-ip-cidrs widens that.
// LoadBalancer ingress IPs are not checked.
func TestExternalIPsOnlyOfNodes(t *testing.T) {
	one := []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))}
	me := []*corev1.Node{node("node-a", "zone-a", "InternalIP=192.0.2.20", "ExternalIP=198.51.100.20")}
	refused := func(i int, a string) string {
		return `spec.externalIPs[` + string(rune('0'+i)) + `] "` + a + `" is refused: it is not an address of this node or of another Node and not inside --external-ip-cidrs`
	}
	runBuildCases(t, []buildCase{
		{
			name:     "default: an externalIP that is no address of this node is refused and named",
			services: []*corev1.Service{withExternalIPs(web(), "8.8.8.8", "192.0.2.10")},
			slices:   one,
			extCIDRs: []string{},
			local:    []string{"192.0.2.10"},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
			},
			problems: []string{refused(0, "8.8.8.8")},
		},
		{
			name:     "the Node object's InternalIP and ExternalIP are this node's addresses",
			services: []*corev1.Service{withExternalIPs(web(), "192.0.2.20", "198.51.100.20", "192.0.2.21")},
			slices:   one,
			nodes:    me,
			nodeName: "node-a",
			extCIDRs: []string{},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"192.0.2.20:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
				"198.51.100.20:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
			},
			problems: []string{refused(2, "192.0.2.21")},
		},
		{
			name:     "another Node's address is captured at connect, without the hop through that node",
			services: []*corev1.Service{withExternalIPs(web(), "192.0.2.20", "198.51.100.20", "192.0.2.30")},
			nodes:    append(me, node("node-b", "zone-a", "InternalIP=192.0.2.40")),
			nodeName: "node-b",
			extCIDRs: []string{},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"192.0.2.20:80/TCP ExternalIP default/web:http -> []",
				"198.51.100.20:80/TCP ExternalIP default/web:http -> []",
			},
			problems: []string{refused(2, "192.0.2.30")},
		},
		{
			name:     "--nodeport-addresses does not restrict externalIPs",
			services: []*corev1.Service{withExternalIPs(web(), "192.0.2.10")},
			local:    []string{"192.0.2.10"},
			filter:   []string{"10.0.0.0/8"},
			extCIDRs: []string{},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
			},
		},
		{
			name:     "--external-ip-cidrs lets the operator capture other addresses, per family",
			services: []*corev1.Service{withExternalIPs(svc("default/web", "10.96.0.10,fd00::10", sport("http", tcp, 80)), "203.0.113.9", "2001:db8::9", "203.0.114.9")},
			extCIDRs: []string{"203.0.113.0/24", "2001:db8::/64"},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.9:80/TCP ExternalIP default/web:http -> []",
				"[2001:db8::9]:80/TCP ExternalIP default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
			problems: []string{refused(2, "203.0.114.9")},
		},
		{
			name:     "LoadBalancer ingress IPs keep today's handling: written through the status subresource, not by any Service author",
			services: []*corev1.Service{withIngress(withType(web(), corev1.ServiceTypeLoadBalancer), ingress("203.0.113.7", nil))},
			extCIDRs: []string{},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
			},
		},
	})
}

func TestBuildExternalIPsAndLoadBalancers(t *testing.T) {
	vip, proxy := ptr(corev1.LoadBalancerIPModeVIP), ptr(corev1.LoadBalancerIPModeProxy)
	one := []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))}
	lb := func() *corev1.Service { return withType(web(), corev1.ServiceTypeLoadBalancer) }
	runBuildCases(t, []buildCase{
		{
			name:     "externalIPs: a frontend per external IP and port, even on a ClusterIP Service",
			services: []*corev1.Service{withExternalIPs(svc("default/web", "10.96.0.10", sport("http", tcp, 80), sport("dns", udp, 53)), "192.0.2.10", "192.0.2.11")},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", eports(eport("http", tcp, 8080), eport("dns", udp, 5353)), ready("10.0.0.1"))},
			want: []string{
				"10.96.0.10:53/UDP ClusterIP default/web:dns -> [10.0.0.1:5353]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"192.0.2.10:53/UDP ExternalIP default/web:dns -> [10.0.0.1:5353]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
				"192.0.2.11:53/UDP ExternalIP default/web:dns -> [10.0.0.1:5353]",
				"192.0.2.11:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "dual-stack externalIPs go with the cluster IP of their family",
			services: []*corev1.Service{withExternalIPs(svc("default/web", "10.96.0.10,fd00::10", sport("http", tcp, 80)), "2001:db8::10", "192.0.2.10")},
			slices:   one,
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
				"[2001:db8::10]:80/TCP ExternalIP default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "externalIP of a family the Service does not have is a problem",
			services: []*corev1.Service{withExternalIPs(web(), "2001:db8::10")},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`spec.externalIPs[0] "2001:db8::10" is IPv6 but the Service has no IPv6 cluster IP`},
		},
		{
			name:     "unusable externalIPs are problems; the others are served",
			services: []*corev1.Service{withExternalIPs(web(), "192.0.2.300", "127.0.0.1", "239.1.2.3", "fe80::1%eth0", "::ffff:192.0.2.10")},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
			},
			problems: []string{
				`spec.externalIPs[0] "192.0.2.300" is not an IP address`,
				`spec.externalIPs[1] "127.0.0.1" is loopback`,
				`spec.externalIPs[2] "239.1.2.3" is multicast`,
				`spec.externalIPs[3] "fe80::1%eth0" has an IPv6 zone`,
			},
		},
		{
			name:     "a repeated externalIP is one frontend",
			services: []*corev1.Service{withExternalIPs(web(), "192.0.2.10", "192.0.2.10")},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
			},
		},
		{
			name:     "LoadBalancer ingress IPs: a frontend per IP on each service port",
			services: []*corev1.Service{withIngress(lb(), ingress("203.0.113.7", nil), ingress("203.0.113.8", vip))},
			slices:   one,
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.1:8080]",
				"203.0.113.8:80/TCP LoadBalancer default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "LB ingress with ipMode Proxy skipped: the node's clients must go through the load balancer",
			services: []*corev1.Service{withIngress(lb(), ingress("203.0.113.7", proxy), ingress("203.0.113.8", nil))},
			slices:   one,
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"203.0.113.8:80/TCP LoadBalancer default/web:http -> [10.0.0.1:8080]",
			},
		},
		{
			name:     "LB ingress with an unknown ipMode is a problem and skipped, as kube-proxy captures VIP mode only",
			services: []*corev1.Service{withIngress(lb(), ingress("203.0.113.7", ptr(corev1.LoadBalancerIPMode("Direct"))))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`status.loadBalancer.ingress[0].ipMode "Direct" is not VIP or Proxy`},
		},
		{
			name: "LB ingress with only a hostname is skipped",
			services: []*corev1.Service{withIngress(lb(), corev1.LoadBalancerIngress{Hostname: "lb.example.com"},
				ingress("203.0.113.7", nil))},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
			},
		},
		{
			name:     "LB ingress of a family the Service does not have is skipped silently",
			services: []*corev1.Service{withIngress(lb(), ingress("2001:db8::7", nil), ingress("203.0.113.7", nil))},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
			},
		},
		{
			name:     "an unusable LB ingress IP is a problem",
			services: []*corev1.Service{withIngress(lb(), ingress("0.0.0.0", nil), ingress("lb", nil))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{
				`status.loadBalancer.ingress[0].ip "0.0.0.0" is unspecified`,
				`status.loadBalancer.ingress[1].ip "lb" is not an IP address`,
			},
		},
		{
			name:     "LB ingress IPs are used whatever spec.type says, as kube-proxy does",
			services: []*corev1.Service{withIngress(web(), ingress("203.0.113.7", nil))},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
			},
		},
	})
}
