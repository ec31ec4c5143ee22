package servicemap

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestParseSourceRange: kube-proxy's parse of one entry (ParseCIDRSloppy
// after trimming, which sourceRanges does), as a masked netip.Prefix.
func TestParseSourceRange(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" = malformed
	}{
		{"203.0.113.0/24", "203.0.113.0/24"},
		{"203.0.113.9/24", "203.0.113.0/24"}, // host bits: masked, as net.ParseCIDR does
		{"010.001.0.0/16", "10.1.0.0/16"},    // leading zeros: decimal, as ParseCIDRSloppy reads them
		{"2001:db8::1/64", "2001:db8::/64"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8"}, // IPv4-mapped: filed under IPv4, as kube-proxy does
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"::/0", "::/0"},
		{"::ffff:0.0.0.0/80", "::/80"}, // masked first, then IPv6, as net.ParseCIDR and kube-proxy do
		{"203.0.113.0", ""},            // an address, not a CIDR
		{"203.0.113.0/33", ""},
		{"fe80::1%eth0/64", ""},
		{"not-a-cidr", ""},
		{" 203.0.113.0/24", ""}, // trimming is the caller's job
	} {
		p, ok := parseSourceRange(tc.in)
		got := ""
		if ok {
			got = p.String()
		}
		if got != tc.want {
			t.Errorf("parseSourceRange(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestBuildLoadBalancerSourceRanges: spec.loadBalancerSourceRanges as
// kube-proxy reads them (newBaseServiceInfo in pkg/proxy/serviceport.go),
// on LoadBalancer frontends of both scopes.
func TestBuildLoadBalancerSourceRanges(t *testing.T) {
	one := []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))}
	lb := func(ranges ...string) *corev1.Service {
		s := withType(svc("default/web", "10.96.0.10", withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeLoadBalancer)
		return withSourceRanges(withIngress(withExternalIPs(s, "192.0.2.10"), ingress("203.0.113.7", nil)), ranges...)
	}
	dual := func(ranges ...string) *corev1.Service {
		s := withType(svc("default/web", "10.96.0.10,fd00::10", sport("http", tcp, 80)), corev1.ServiceTypeLoadBalancer)
		return withSourceRanges(withIngress(s, ingress("203.0.113.7", nil), ingress("2001:db8::7", nil)), ranges...)
	}
	runBuildCases(t, []buildCase{
		{
			name:     "LoadBalancer frontends only: trimmed, masked, sorted, deduplicated; NodePorts and externalIPs stay open",
			services: []*corev1.Service{lb(" 198.51.100.0/24", "10.0.0.0/8 ", "198.51.100.7/24", "010.0.0.0/8")},
			slices:   one,
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.1:8080] sources=[10.0.0.0/8 198.51.100.0/24]",
			},
		},
		{
			name:     "externalTrafficPolicy Local: the twin has the same ranges",
			services: []*corev1.Service{withETP(lb("198.51.100.0/24"), extLocal)},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, on("node-a", ready("10.0.0.1")))},
			nodes:    nodeA(), nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"127.0.0.1:30080/TCP NodePort default/web:http -> [10.0.0.1:8080]",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> [10.0.0.1:8080]",
				"192.0.2.10:80/TCP/external ExternalIP default/web:http -> [10.0.0.1:8080]",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [10.0.0.1:8080] sources=[198.51.100.0/24]",
				"203.0.113.7:80/TCP/external LoadBalancer default/web:http -> [10.0.0.1:8080] sources=[198.51.100.0/24]",
			},
		},
		{
			name:     "each family gets its own ranges; a family the Service gives none of stays open, as in kube-proxy",
			services: []*corev1.Service{dual("198.51.100.0/24", "2001:db8:1::/48", "::ffff:192.0.2.0/120")},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [] sources=[192.0.2.0/24 198.51.100.0/24]",
				"[2001:db8::7]:80/TCP LoadBalancer default/web:http -> [] sources=[2001:db8:1::/48]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "IPv4 ranges only: the IPv6 LB IP accepts every source, as kube-proxy's IPv6 proxier builds no firewall",
			services: []*corev1.Service{dual("198.51.100.0/24")},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [] sources=[198.51.100.0/24]",
				"[2001:db8::7]:80/TCP LoadBalancer default/web:http -> []",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "a malformed entry is a problem naming its index; the valid ones still restrict",
			services: []*corev1.Service{lb("198.51.100.0/24", "198.51.100.300/24", "", "10.0.0.0/8")},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [] sources=[10.0.0.0/8 198.51.100.0/24]",
			},
			problems: []string{`Service default/web: spec.loadBalancerSourceRanges[1] "198.51.100.300/24" is not a CIDR`},
		},
		{
			// kube-proxy skips every entry and builds no firewall: the LB
			// would take every source, undoing what the author asked for.
			name:     "every entry malformed: the LB IPs are not served at all, rather than opened to every source",
			services: []*corev1.Service{lb("198.51.100.0/33", "office")},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
			},
			problems: []string{
				`spec.loadBalancerSourceRanges[0] "198.51.100.0/33" is not a CIDR`,
				`spec.loadBalancerSourceRanges[1] "office" is not a CIDR`,
				`spec.loadBalancerSourceRanges has no valid IPv4 range, and the entries that could not be parsed may have been meant for it: its IPv4 load-balancer IPs [203.0.113.7] are not served until they are fixed`,
			},
		},
		{
			name:     "a malformed entry beside ranges of one family only: the other family is closed, not opened",
			services: []*corev1.Service{dual("198.51.100.0/24", "2001:db8::zz/64")},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [] sources=[198.51.100.0/24]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
			problems: []string{
				`spec.loadBalancerSourceRanges[1] "2001:db8::zz/64" is not a CIDR`,
				`no valid IPv6 range`,
			},
		},
		{
			name:     "only empty entries: no range at all, so every source, and nothing to report (kube-proxy skips them silently)",
			services: []*corev1.Service{lb("", "  ")},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
				"192.0.2.10:80/TCP ExternalIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
			},
		},
		{
			// kube-proxy's allowFromNode: a VIP on a local address makes
			// the node's own connections leave with the VIP as source.
			name:     "a range holding this node's primary address lets the LB IPs themselves in",
			services: []*corev1.Service{dual("10.1.0.0/16", "2001:db8:1::/48")},
			nodes:    []*corev1.Node{node("node-a", "zone-a", "InternalIP=10.1.0.5", "InternalIP=2001:db8:2::5")},
			nodeName: "node-a",
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> [] sources=[10.1.0.0/16 203.0.113.7/32]",
				"[2001:db8::7]:80/TCP LoadBalancer default/web:http -> [] sources=[2001:db8:1::/48]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name: "an LB IP lost to another Service takes its ranges with it; the winner's own (none) apply",
			services: []*corev1.Service{
				withSourceRanges(withIngress(withType(svc("default/zzz", "10.96.0.11", sport("x", tcp, 80)), corev1.ServiceTypeLoadBalancer), ingress("203.0.113.7", nil)), "198.51.100.0/24"),
				withIngress(withType(svc("default/aaa", "10.96.0.12", sport("x", tcp, 80)), corev1.ServiceTypeLoadBalancer), ingress("203.0.113.7", nil)),
			},
			want: []string{
				"10.96.0.11:80/TCP ClusterIP default/zzz:x -> []",
				"10.96.0.12:80/TCP ClusterIP default/aaa:x -> []",
				"203.0.113.7:80/TCP LoadBalancer default/aaa:x -> []",
			},
			problems: []string{`Service default/zzz: 203.0.113.7:80/TCP (LoadBalancer, port "x") is also claimed by Service default/aaa`},
		},
	})
}
