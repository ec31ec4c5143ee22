package servicemap

import (
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/socklb/socklb/pkg/model"
)

const (
	tcp  = corev1.ProtocolTCP
	udp  = corev1.ProtocolUDP
	sctp = corev1.ProtocolSCTP
)

// web is the Service most cases are about: 10.96.0.10:80/TCP named "http".
func web() *corev1.Service { return svc("default/web", "10.96.0.10", sport("http", tcp, 80)) }

var httpPort = eports(eport("http", tcp, 8080))

func TestBuild(t *testing.T) {
	runBuildCases(t, []buildCase{
		// Which Services get frontends.
		{
			name:     "ClusterIP service gets one frontend per port, backends from its slice",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"), ready("10.0.0.2"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "headless service (clusterIP None) is skipped",
			services: []*corev1.Service{svc("default/web", "None", sport("http", tcp, 80))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
		},
		{
			name:     "service with the service-proxy-name label belongs to another proxy",
			services: []*corev1.Service{withLabel(web(), "service.kubernetes.io/service-proxy-name", "")},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
		},
		{
			// kube-proxy's Service informer selects on service-proxy-name and
			// clusterIP != None only (cmd/kube-proxy/app/server.go).
			name:     "service with the headless label but a cluster IP is proxied, as by kube-proxy",
			services: []*corev1.Service{withLabel(web(), corev1.IsHeadlessService, "")},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "ExternalName service is skipped even with a clusterIP",
			services: []*corev1.Service{withType(web(), corev1.ServiceTypeExternalName)},
		},
		{
			name: "NodePort and LoadBalancer services get their ClusterIP frontend",
			services: []*corev1.Service{
				withType(svc("default/np", "10.96.0.11", sport("", tcp, 80)), corev1.ServiceTypeNodePort),
				withType(svc("default/lb", "10.96.0.12", sport("", tcp, 80)), corev1.ServiceTypeLoadBalancer),
			},
			want: []string{
				"10.96.0.11:80/TCP ClusterIP default/np: -> []",
				"10.96.0.12:80/TCP ClusterIP default/lb: -> []",
			},
		},
		{
			name:     "empty spec.type is the API default, ClusterIP",
			services: []*corev1.Service{withType(web(), "")},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "unknown spec.type is a problem",
			services: []*corev1.Service{withType(web(), "Magic")},
			problems: []string{`Service default/web: spec.type "Magic"`},
		},
		{
			name:     "service without an allocated clusterIP is skipped silently",
			services: []*corev1.Service{svc("default/web", "", sport("http", tcp, 80))},
		},

		// Cluster IPs.
		{
			name:     "invalid clusterIP is a problem and the whole service is skipped",
			services: []*corev1.Service{svc("default/web", "10.96.0.10,fd00::zz", sport("http", tcp, 80))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			problems: []string{`Service default/web: spec.clusterIPs[1] "fd00::zz" is not an IP address`},
		},
		{
			name:     "loopback clusterIP is a problem: it would capture the node's own localhost connections",
			services: []*corev1.Service{svc("default/web", "127.0.0.1", sport("ssh", tcp, 22))},
			problems: []string{`Service default/web: spec.clusterIPs[0] "127.0.0.1" is loopback, which is never a cluster IP`},
		},
		{
			name: "spec.clusterIP is used when spec.clusterIPs is empty",
			services: []*corev1.Service{func() *corev1.Service {
				s := web()
				s.Spec.ClusterIPs = nil
				return s
			}()},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "a second clusterIP of the same family is a problem and ignored",
			services: []*corev1.Service{svc("default/web", "10.96.0.10,10.96.0.11", sport("http", tcp, 80))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`spec.clusterIPs[1] "10.96.0.11" is a second IPv4 cluster IP`},
		},
		{
			name:     "dual-stack service with only an IPv4 slice: the IPv6 frontend has no backends",
			services: []*corev1.Service{svc("default/web", "10.96.0.10,fd00::10", sport("http", tcp, 80))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> []",
			},
		},
		{
			name:     "dual-stack service: each family gets the slices of its addressType",
			services: []*corev1.Service{svc("default/web", "fd00::10,10.96.0.10", sport("http", tcp, 80))},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", httpPort, ready("10.0.0.1")),
				v6("default/web-2", "web", httpPort, ready("fd00:1::1")),
			},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"[fd00::10]:80/TCP ClusterIP default/web:http -> [[fd00:1::1]:8080]",
			},
		},
		{
			name:     "an IPv6 slice does not feed an IPv4-only service",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v6("default/web-1", "web", httpPort, ready("fd00:1::1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},

		// Service ports and protocols.
		{
			name:     "named service port resolves through the slice port of the same name",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("http", tcp, 80), sport("metrics", tcp, 9090))},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web",
				eports(eport("metrics", tcp, 19090), eport("http", tcp, 8080)), ready("10.0.0.1"))},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:9090/TCP ClusterIP default/web:metrics -> [10.0.0.1:19090]",
			},
		},
		{
			name:     "unnamed service port resolves through the unnamed slice port",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("", tcp, 80))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", eports(eport("", tcp, 8080)), ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web: -> [10.0.0.1:8080]"},
		},
		{
			name:     "slice port with nil name and protocol is the API default: unnamed TCP",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("", "", 80))},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web",
				eports(discoveryv1.EndpointPort{Port: ptr(int32(8080))}), ready("10.0.0.1"))},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web: -> [10.0.0.1:8080]"},
		},
		{
			name:     "port name mismatch: the slice contributes nothing to that port",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", eports(eport("https", tcp, 8443)), ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "target port comes from the slice, never from spec.targetPort",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", withTargetPort(sport("http", tcp, 80), 9999))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name: "TCP and UDP on the same port number are two frontends; SCTP is refused loudly (no cgroup hook runs for it)",
			services: []*corev1.Service{svc("kube-system/dns", "10.96.0.53",
				sport("dns-tcp", tcp, 53), sport("dns", udp, 53), sport("sig", sctp, 53))},
			slices: []*discoveryv1.EndpointSlice{v4("kube-system/dns-1", "dns",
				eports(eport("dns-tcp", tcp, 5353), eport("dns", udp, 5354), eport("sig", sctp, 5355)), ready("10.0.0.1"))},
			want: []string{
				"10.96.0.53:53/TCP ClusterIP kube-system/dns:dns-tcp -> [10.0.0.1:5353]",
				"10.96.0.53:53/UDP ClusterIP kube-system/dns:dns -> [10.0.0.1:5354]",
			},
			problems: []string{`Service kube-system/dns: port "sig" is SCTP, which socklb cannot serve: the kernel runs no cgroup connect hook for SCTP sockets`},
		},
		{
			name:     "slice port of another protocol does not match even with the same name",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("http", udp, 80))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/UDP ClusterIP default/web:http -> []"},
		},
		{
			name:     "unsupported protocol is a problem and only that port is skipped",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("http", tcp, 80), sport("ping", "ICMP", 7))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
			problems: []string{`Service default/web: port "ping" has protocol "ICMP"; socklb handles TCP and UDP`},
		},
		{
			name:     "service port 0 or above 65535 is a problem for that port",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("http", tcp, 80), sport("zero", tcp, 0), sport("", tcp, 70000))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{
				`port "zero" has port number 0; it must be 1-65535 (fix spec.ports[1].port)`,
				`port 70000 has port number 70000; it must be 1-65535 (fix spec.ports[2].port)`,
			},
		},
		{
			// The bound itself, on both sides of it: 0 and 70000 above
			// would still be refused by a check of ">= 65535".
			name:     "port 65535 is the last valid port, as a Service port and as an endpoint port",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("top", tcp, 65535), sport("over", tcp, 65536))},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web",
				eports(eport("top", tcp, 65535), eport("over", tcp, 65536)), ready("10.0.0.1"))},
			want: []string{"10.96.0.10:65535/TCP ClusterIP default/web:top -> [10.0.0.1:65535]"},
			problems: []string{
				`EndpointSlice default/web-1: ports[1] (name "over") has port number 65536; it must be 1-65535 (fix ports[1].port)`,
				`Service default/web: port "over" has port number 65536; it must be 1-65535 (fix spec.ports[1].port)`,
			},
		},
		{
			name:     "the same port and protocol twice in one service: the first wins",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("http", tcp, 80), sport("again", tcp, 80))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`port "again" repeats 80/TCP of port "http"`},
		},

		// Endpoint conditions.
		{
			name:     "not-ready endpoints are excluded while any endpoint is ready",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"), notReady("10.0.0.2"), servingTerminating("10.0.0.3"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "no ready endpoint: serving-terminating endpoints are used",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				servingTerminating("10.0.0.1"), notReady("10.0.0.2"), terminatingNotServing("10.0.0.3"), servingTerminating("10.0.0.4"))},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.4:8080]"},
		},
		{
			name:     "terminating but not serving endpoints are never used",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, terminatingNotServing("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "serving but not terminating (and not ready) is no fallback",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, cond("10.0.0.1", no, yes, no))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "nil ready is treated as ready",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, cond("10.0.0.1", nil, nil, nil), notReady("10.0.0.2"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "nil serving on a terminating endpoint is serving, as in kube-proxy",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, cond("10.0.0.1", no, nil, yes))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "the fallback is per frontend: one port's ready endpoints do not block another's",
			services: []*corev1.Service{svc("default/web", "10.96.0.10", sport("http", tcp, 80), sport("admin", tcp, 81))},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", httpPort, ready("10.0.0.1")),
				v4("default/web-2", "web", eports(eport("admin", tcp, 8081)), servingTerminating("10.0.0.2")),
			},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]",
				"10.96.0.10:81/TCP ClusterIP default/web:admin -> [10.0.0.2:8081]",
			},
		},

		// Duplicates.
		{
			name:     "the same ip:port in two slices appears once",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", httpPort, ready("10.0.0.1"), ready("10.0.0.2")),
				v4("default/web-2", "web", httpPort, ready("10.0.0.2"), ready("10.0.0.3")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080 10.0.0.3:8080]"},
		},
		{
			name:     "duplicate with one ready copy: ready wins, whichever slice holds it",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, notReady("10.0.0.1"), ready("10.0.0.2")),
				v4("default/web-b", "web", httpPort, ready("10.0.0.1"), notReady("10.0.0.2")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.2:8080]"},
		},
		{
			name:     "duplicate with one ready copy counts as ready: no terminating fallback",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, servingTerminating("10.0.0.1"), servingTerminating("10.0.0.2")),
				v4("default/web-b", "web", httpPort, ready("10.0.0.1")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "duplicate with a serving-terminating and an unusable copy falls back to it",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, terminatingNotServing("10.0.0.1")),
				v4("default/web-b", "web", httpPort, servingTerminating("10.0.0.1")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			// pkg/proxy/endpointslicecache.go addEndpoints: `!exists || !terminating`.
			name:     "duplicate: the copy that is not terminating wins even when not ready, hiding the terminating one",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, servingTerminating("10.0.0.1"), servingTerminating("10.0.0.2")),
				v4("default/web-b", "web", httpPort, notReady("10.0.0.1")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]"},
		},
		{
			name:     "duplicate: the not-terminating copy wins whichever slice comes first",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, notReady("10.0.0.1")),
				v4("default/web-b", "web", httpPort, servingTerminating("10.0.0.1"), servingTerminating("10.0.0.2")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.2:8080]"},
		},
		{
			name:     "duplicate: a not-ready, not-terminating copy alone leaves the Service with no usable endpoint",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, servingTerminating("10.0.0.1")),
				v4("default/web-b", "web", httpPort, notReady("10.0.0.1")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "the same IP with two target ports (target port change) is two backends",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-a", "web", httpPort, ready("10.0.0.1")),
				v4("default/web-b", "web", eports(eport("http", tcp, 8081)), ready("10.0.0.1")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080 10.0.0.1:8081]"},
		},

		// EndpointSlice association and validation.
		{
			name:     "slice without the service-name label is a problem and ignored",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/orphan", "", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`EndpointSlice default/orphan: has no "kubernetes.io/service-name" label`},
		},
		{
			name:     "slice of another namespace is ignored",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("other/web-1", "web", httpPort, ready("10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			// kube-proxy's slice informer selects on the headless label only
			// (cmd/kube-proxy/app/server.go): the Service's labels decide.
			name:     "slice with the service-proxy-name label is used for its proxied Service, as by kube-proxy",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
				s := v4("default/web-1", "web", httpPort, ready("10.0.0.1"))
				s.Labels["service.kubernetes.io/service-proxy-name"] = "other"
				return s
			}()},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "slice with the headless label is ignored, as kube-proxy's slice informer does",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{func() *discoveryv1.EndpointSlice {
				s := v4("default/web-1", "web", httpPort, ready("10.0.0.1"))
				s.Labels[corev1.IsHeadlessService] = ""
				return s
			}()},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "FQDN slice is ignored",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{slice("default/web-1", "web", discoveryv1.AddressTypeFQDN, httpPort, ready("example.com"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "slices of skipped services are not validated",
			services: []*corev1.Service{svc("default/web", "None", sport("http", tcp, 80))},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("not-an-ip"))},
		},
		{
			name:     "slice port without a number is a problem and unusable",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web",
				eports(discoveryv1.EndpointPort{Name: ptr("http")}, eport("http", tcp, 0)), ready("10.0.0.1"))},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{
				`EndpointSlice default/web-1: ports[0] (name "http") has no port number; kube-proxy and socklb cannot use it, set ports[0].port`,
				`EndpointSlice default/web-1: ports[1] (name "http") has no port number; kube-proxy and socklb cannot use it, set ports[1].port`,
			},
		},
		{
			name:     "invalid endpoint address is a problem and skipped",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("10.0.0.1"), ready("10.0.0.256"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
			problems: []string{`EndpointSlice default/web-1: endpoints[1] address "10.0.0.256" is not an IP address`},
		},
		{
			name:     "endpoint address of the wrong family for the slice is a problem and skipped",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("fd00:1::1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`endpoints[0] address "fd00:1::1" is IPv6 but the slice's addressType is IPv4`},
		},
		{
			name:     "unspecified, loopback and link-local endpoint addresses are problems, as in API validation",
			services: []*corev1.Service{svc("default/web", "fd00::10", sport("http", tcp, 80))},
			slices: []*discoveryv1.EndpointSlice{v6("default/web-1", "web", httpPort,
				ready("::"), ready("::1"), ready("fe80::1"), ready("ff02::1"), ready("fd00:1::1"))},
			want: []string{"[fd00::10]:80/TCP ClusterIP default/web:http -> [[fd00:1::1]:8080]"},
			problems: []string{
				`endpoints[0] address "::" is unspecified`,
				`endpoints[1] address "::1" is loopback`,
				`endpoints[2] address "fe80::1" is link-local`,
				`endpoints[3] address "ff02::1" is link-local multicast`,
			},
		},
		{
			name:     "endpoint without addresses is a problem and skipped",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, discoveryv1.Endpoint{})},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
			problems: []string{`endpoints[0] has no addresses`},
		},
		{
			name:     "only the first address of an endpoint is used, as in kube-proxy",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort,
				discoveryv1.Endpoint{Addresses: []string{"10.0.0.1", "10.0.0.2", "garbage"}})},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},
		{
			name:     "IPv4-mapped endpoint address is its IPv4 address",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort, ready("::ffff:10.0.0.1"))},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"},
		},

		// Empty and conflicting state.
		{
			name:     "no slices: a frontend with no backends (connect gets ECONNREFUSED)",
			services: []*corev1.Service{web()},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name:     "slice with no endpoints: a frontend with no backends",
			services: []*corev1.Service{web()},
			slices:   []*discoveryv1.EndpointSlice{v4("default/web-1", "web", httpPort)},
			want:     []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"},
		},
		{
			name: "two services on the same frontend: the smaller namespace/name wins",
			services: []*corev1.Service{
				svc("default/zeta", "10.96.0.10", sport("z", tcp, 80)),
				svc("default/alpha", "10.96.0.10", sport("a", tcp, 80), sport("b", tcp, 81)),
			},
			want: []string{
				"10.96.0.10:80/TCP ClusterIP default/alpha:a -> []",
				"10.96.0.10:81/TCP ClusterIP default/alpha:b -> []",
			},
			problems: []string{`Service default/zeta: 10.96.0.10:80/TCP (ClusterIP, port "z") is also claimed by Service default/alpha port "a" (ClusterIP), which wins as the smaller namespace/name`},
		},
		{
			name:     "backends are sorted by address (numerically) then port",
			services: []*corev1.Service{web()},
			slices: []*discoveryv1.EndpointSlice{
				v4("default/web-1", "web", httpPort, ready("10.0.0.10"), ready("10.0.0.9"), ready("9.0.0.1")),
				v4("default/web-2", "web", eports(eport("http", tcp, 80)), ready("10.0.0.9")),
			},
			want: []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [9.0.0.1:8080 10.0.0.9:80 10.0.0.9:8080 10.0.0.10:8080]"},
		},
	})
}

// TestBuildOrderIndependent feeds the same objects in many orders: the
// datapath diff must not see churn because an informer listed differently.
func TestBuildOrderIndependent(t *testing.T) {
	services := []*corev1.Service{
		svc("default/web", "10.96.0.10,fd00::10", sport("http", tcp, 80), sport("dns", udp, 53)),
		svc("default/alpha", "10.96.0.10", sport("x", tcp, 80)),
		svc("default/bad", "nope", sport("x", tcp, 80)),
		svc("kube-system/dns", "10.96.0.53", sport("dns", udp, 53), sport("ping", "ICMP", 0)),
		// An externalIP and an LB IP each claimed by two Services: one
		// collision decided by name, one by kind.
		// np has externalTrafficPolicy Local (twins) and source ranges
		// given out of order, with a repeat and a bad one.
		withSourceRanges(withETP(withIngress(withExternalIPs(withType(svc("default/np", "10.96.0.20", withNodePort(sport("http", tcp, 80), 30080)),
			corev1.ServiceTypeLoadBalancer), "192.0.2.10"), ingress("203.0.113.7", nil)), extLocal),
			"192.168.0.0/16", "10.0.0.0/8", "bad", " 10.0.0.0/8"),
		withExternalIPs(svc("default/aaa", "10.96.0.21", sport("x", tcp, 80)), "192.0.2.10", "203.0.113.7"),
	}
	endpointSlices := []*discoveryv1.EndpointSlice{
		v4("default/np-1", "np", httpPort, zoneHints(ready("10.0.2.1"), "zone-a"), zoneHints(ready("10.0.2.2"), "zone-b")),
		v4("default/np-2", "np", httpPort, zoneHints(ready("10.0.2.3"), "zone-a")),
		v4("default/web-1", "web", eports(eport("http", tcp, 8080), eport("dns", udp, 5353)),
			ready("10.0.0.3"), notReady("10.0.0.1"), ready("bad")),
		v4("default/web-2", "web", eports(eport("http", tcp, 8080), eport("dns", udp, 5353)),
			ready("10.0.0.1"), ready("10.0.0.2")),
		v6("default/web-3", "web", eports(eport("http", tcp, 8080)), servingTerminating("fd00:1::2"), servingTerminating("fd00:1::1")),
		v4("default/orphan", "", nil),
		v4("kube-system/dns-1", "dns", eports(eport("dns", udp, 53)), ready("10.0.1.2"), ready("10.0.1.1")),
	}
	nodes := []*corev1.Node{node("node-b", "zone-b", "InternalIP=10.1.0.6"), node("node-a", "zone-a", "InternalIP=10.1.0.5")}
	local := []netip.Addr{netip.MustParseAddr("10.1.0.5"), netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("192.168.1.5")}
	in := model.Input{Services: services, Slices: endpointSlices, Nodes: nodes, NodeName: "node-a", LocalAddresses: local, ExternalIPCIDRs: allAddresses}
	wantState, wantProblems := Build(in)
	if len(wantState) != 12 || len(wantProblems) < 8 {
		t.Fatalf("fixture does not exercise enough: %d frontends, %d problems", len(wantState), len(wantProblems))
	}

	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		in := model.Input{Services: slices.Clone(services), Slices: slices.Clone(endpointSlices), Nodes: slices.Clone(nodes),
			NodeName: "node-a", LocalAddresses: slices.Clone(local), ExternalIPCIDRs: allAddresses}
		r.Shuffle(len(in.Services), func(i, j int) { in.Services[i], in.Services[j] = in.Services[j], in.Services[i] })
		r.Shuffle(len(in.Slices), func(i, j int) { in.Slices[i], in.Slices[j] = in.Slices[j], in.Slices[i] })
		r.Shuffle(len(in.Nodes), func(i, j int) { in.Nodes[i], in.Nodes[j] = in.Nodes[j], in.Nodes[i] })
		r.Shuffle(len(in.LocalAddresses), func(i, j int) {
			in.LocalAddresses[i], in.LocalAddresses[j] = in.LocalAddresses[j], in.LocalAddresses[i]
		})
		st, ps := Build(in)
		if !statesEqual(st, wantState) {
			t.Fatalf("state depends on input order:\n got %q\nwant %q", render(st), render(wantState))
		}
		if !reflect.DeepEqual(ps, wantProblems) {
			t.Fatalf("problems depend on input order:\n got %q\nwant %q", renderProblems(ps), renderProblems(wantProblems))
		}
	}
}

func statesEqual(a, b State) bool {
	if len(a) != len(b) {
		return false
	}
	for k, fa := range a {
		fb, ok := b[k]
		if !ok || !fa.Equal(fb) {
			return false
		}
	}
	return true
}

func TestBuildDuplicateServiceObject(t *testing.T) {
	first := svc("default/web", "10.96.0.10", sport("http", tcp, 80))
	second := svc("default/web", "10.96.0.11", sport("http", tcp, 80))
	st, ps := Build(model.Input{Services: []*corev1.Service{first, second}})
	want := []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> []"}
	if got := render(st); !slices.Equal(got, want) {
		t.Errorf("state: got %q, want %q", got, want)
	}
	if len(ps) != 1 || !strings.Contains(ps[0].String(), "appears more than once") {
		t.Errorf("problems: got %q", renderProblems(ps))
	}
}

func TestBuildNilObjects(t *testing.T) {
	st, ps := Build(model.Input{
		Services: []*corev1.Service{nil, web()},
		Slices:   []*discoveryv1.EndpointSlice{nil, v4("default/web-1", "web", httpPort, ready("10.0.0.1"))},
		Nodes:    []*corev1.Node{nil},
		NodeName: "node-a",
	})
	want := []string{"10.96.0.10:80/TCP ClusterIP default/web:http -> [10.0.0.1:8080]"}
	if got := render(st); !slices.Equal(got, want) || len(ps) != 0 {
		t.Errorf("got %q, problems %q", got, renderProblems(ps))
	}
}
