package servicemap

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestBuildFrontendCollisions: one key asked for twice. The first claim in
// (kind, namespace/name) order wins; the loser is reported. The kinds'
// order is claimRank's: NodePorts last, as in iptables mode.
func TestBuildFrontendCollisions(t *testing.T) {
	runBuildCases(t, []buildCase{
		{
			name: "an externalIP equal to another Service's clusterIP: the ClusterIP wins, whatever the names",
			services: []*corev1.Service{
				withExternalIPs(svc("default/aaa", "10.96.0.11", sport("x", tcp, 80)), "10.96.0.10"),
				web(),
			},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"10.96.0.11:80/TCP ClusterIP default/aaa:x -> []",
			},
			problems: []string{`Service default/aaa: 10.96.0.10:80/TCP (ExternalIP, port "x") is also claimed by Service default/web port "http" (ClusterIP), which wins because ClusterIP frontends take precedence over ExternalIP ones`},
		},
		{
			// pkg/proxy/iptables/proxier.go: KUBE-SERVICES' externalIP rules
			// come before its last rule, the jump to KUBE-NODEPORTS.
			// The remote-node wildcard collides with wildcards only: it stays.
			name: "an externalIP on a node address and another Service's nodePort: the ExternalIP wins, as in iptables mode",
			services: []*corev1.Service{
				withExternalIPs(svc("default/zzz", "10.96.0.11", sport("x", tcp, 30080)), "10.1.0.5"),
				nodePortSvc(),
			},
			local: []string{"10.1.0.5"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP ExternalIP default/zzz:x -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"10.96.0.11:30080/TCP ClusterIP default/zzz:x -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
			problems: []string{`Service default/web: 10.1.0.5:30080/TCP (NodePort, port "http") is also claimed by Service default/zzz port "x" (ExternalIP), which wins because ExternalIP frontends take precedence over NodePort ones`},
		},
		{
			name: "an LB IP on a node address and another Service's nodePort: the LoadBalancer wins, as in iptables mode",
			services: []*corev1.Service{
				withIngress(withType(svc("default/zzz", "10.96.0.11", sport("x", tcp, 30080)), corev1.ServiceTypeLoadBalancer), ingress("10.1.0.5", nil)),
				nodePortSvc(),
			},
			local: []string{"10.1.0.5"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP LoadBalancer default/zzz:x -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"10.96.0.11:30080/TCP ClusterIP default/zzz:x -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
			problems: []string{`Service default/web: 10.1.0.5:30080/TCP (NodePort, port "http") is also claimed by Service default/zzz port "x" (LoadBalancer), which wins because LoadBalancer frontends take precedence over NodePort ones`},
		},
		{
			name: "a Service's externalIP on a node address equal to its own nodePort: one frontend, no problem",
			services: []*corev1.Service{withExternalIPs(withType(svc("default/web", "10.96.0.10",
				withNodePort(sport("http", tcp, 30080), 30080)), corev1.ServiceTypeNodePort), "10.1.0.5")},
			local: []string{"10.1.0.5"},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.1.0.5:30080/TCP ExternalIP default/web:http -> []",
				"10.96.0.10:30080/TCP ClusterIP default/web:http -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
		},
		{
			name: "an LB IP equal to another Service's externalIP: the LoadBalancer wins",
			services: []*corev1.Service{
				withExternalIPs(svc("default/aaa", "10.96.0.11", sport("x", tcp, 80)), "203.0.113.7"),
				withIngress(withType(web(), corev1.ServiceTypeLoadBalancer), ingress("203.0.113.7", nil)),
			},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"10.96.0.11:80/TCP ClusterIP default/aaa:x -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
			},
			problems: []string{`Service default/aaa: 203.0.113.7:80/TCP (ExternalIP, port "x") is also claimed by Service default/web port "http" (LoadBalancer), which wins because LoadBalancer frontends take precedence over ExternalIP ones`},
		},
		{
			name: "two Services with the same externalIP and port: the smaller namespace/name wins",
			services: []*corev1.Service{
				withExternalIPs(svc("default/zeta", "10.96.0.11", sport("z", tcp, 80)), "192.0.2.10"),
				withExternalIPs(svc("default/alpha", "10.96.0.12", sport("a", tcp, 80)), "192.0.2.10"),
			},
			want: []string{
				"10.96.0.11:80/TCP ClusterIP default/zeta:z -> []",
				"10.96.0.12:80/TCP ClusterIP default/alpha:a -> []",
				"192.0.2.10:80/TCP ExternalIP default/alpha:a -> []",
			},
			problems: []string{`Service default/zeta: 192.0.2.10:80/TCP (ExternalIP, port "z") is also claimed by Service default/alpha port "a" (ExternalIP), which wins as the smaller namespace/name`},
		},
		{
			name: "an LB IP also listed in the same Service's externalIPs: one frontend, no problem",
			services: []*corev1.Service{withIngress(withExternalIPs(withType(web(), corev1.ServiceTypeLoadBalancer), "203.0.113.7"),
				ingress("203.0.113.7", nil))},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"203.0.113.7:80/TCP LoadBalancer default/web:http -> []",
			},
		},
		{
			name:     "an externalIP equal to the Service's own clusterIP is still a problem",
			services: []*corev1.Service{withExternalIPs(web(), "10.96.0.10")},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`Service default/web: 10.96.0.10:80/TCP (ExternalIP, port "http") is also claimed by Service default/web port "http" (ClusterIP)`},
		},
		{
			name: "two ports of one Service with the same nodePort: the earlier port wins",
			services: []*corev1.Service{withType(svc("default/web", "10.96.0.10",
				withNodePort(sport("a", tcp, 80), 30080), withNodePort(sport("b", tcp, 81), 30080)), corev1.ServiceTypeNodePort)},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:a -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:a -> []",
				"10.96.0.10:81/TCP ClusterIP default/web:b -> []",
				"127.0.0.1:30080/TCP NodePort default/web:a -> []",
			},
			problems: []string{
				`Service default/web: 127.0.0.1:30080/TCP (NodePort, port "b") is also claimed by Service default/web port "a" (NodePort), which wins as the earlier port`,
				`Service default/web: 0.0.0.0:30080/TCP (NodePort, port "b") is also claimed by Service default/web port "a" (NodePort), which wins as the earlier port`,
			},
		},
		{
			// Only a manifest can carry this: the API server allocates
			// each nodePort once.
			name: "two Services with the same nodePort: the wildcards collide as the node addresses do, the smaller name wins",
			services: []*corev1.Service{
				withType(svc("default/zzz", "10.96.0.11", withNodePort(sport("x", tcp, 80), 30080)), corev1.ServiceTypeNodePort),
				nodePortSvc(),
			},
			want: []string{
				"0.0.0.0:30080/TCP NodePort default/web:http -> []",
				"10.96.0.10:80/TCP ClusterIP default/web:http -> []",
				"10.96.0.11:80/TCP ClusterIP default/zzz:x -> []",
				"127.0.0.1:30080/TCP NodePort default/web:http -> []",
			},
			problems: []string{
				`Service default/zzz: 127.0.0.1:30080/TCP (NodePort, port "x") is also claimed by Service default/web port "http" (NodePort), which wins as the smaller namespace/name`,
				`Service default/zzz: 0.0.0.0:30080/TCP (NodePort, port "x") is also claimed by Service default/web port "http" (NodePort), which wins as the smaller namespace/name`,
			},
		},
	})
}
