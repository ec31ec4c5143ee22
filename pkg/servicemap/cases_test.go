package servicemap

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/socklb/socklb/pkg/model"

	"github.com/socklb/socklb/internal/testkit"
)

// buildCase is one table case of Build; every table in the package uses it.
type buildCase struct {
	name     string
	services []*corev1.Service
	slices   []*discoveryv1.EndpointSlice
	nodes    []*corev1.Node
	nodeName string
	local    []string // model.Input.LocalAddresses
	filter   []string // model.Input.NodePortAddresses
	// extCIDRs is model.Input.ExternalIPCIDRs; nil allows every address, the
	// setting the cases written before the node-address rule assume, so
	// a case about that rule sets it (to empty for the default).
	extCIDRs []string
	primary  bool     // model.Input.NodePortPrimary
	want     []string // render(State)
	problems []string // each a substring of the problem at that index
}

func (tc buildCase) input() model.Input {
	in := model.Input{Services: tc.services, Slices: tc.slices, Nodes: tc.nodes, NodeName: tc.nodeName, NodePortPrimary: tc.primary}
	for _, a := range tc.local {
		in.LocalAddresses = append(in.LocalAddresses, netip.MustParseAddr(a))
	}
	for _, p := range tc.filter {
		in.NodePortAddresses = append(in.NodePortAddresses, netip.MustParsePrefix(p))
	}
	in.ExternalIPCIDRs = allAddresses
	if tc.extCIDRs != nil {
		in.ExternalIPCIDRs = []netip.Prefix{}
	}
	for _, p := range tc.extCIDRs {
		in.ExternalIPCIDRs = append(in.ExternalIPCIDRs, netip.MustParsePrefix(p))
	}
	in.PeerAddresses = PeerAddresses(in) // as the agent hands them over
	return in
}

var allAddresses = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

func runBuildCases(t *testing.T, cases []buildCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.input()
			st, ps := Build(in)
			checkInvariants(t, in, st, ps)

			if got := renderServed(st, in); !slices.Equal(got, tc.want) {
				t.Errorf("state:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
			}
			got := renderProblems(ps)
			ok := len(got) == len(tc.problems)
			for i := 0; ok && i < len(got); i++ {
				ok = strings.Contains(got[i], tc.problems[i])
			}
			if !ok {
				t.Errorf("problems:\n got %q\nwant %q", got, tc.problems)
			}
		})
	}
}

// Service modifiers, each setting the one field a case is about.

func withITP(s *corev1.Service, p corev1.ServiceInternalTrafficPolicy) *corev1.Service {
	s.Spec.InternalTrafficPolicy = &p
	return s
}

func withETP(s *corev1.Service, p corev1.ServiceExternalTrafficPolicy) *corev1.Service {
	s.Spec.ExternalTrafficPolicy = p
	return s
}

// withAffinity sets sessionAffinity; timeout nil leaves sessionAffinityConfig
// out, as an undefaulted manifest does.
func withAffinity(s *corev1.Service, a corev1.ServiceAffinity, timeout *int32) *corev1.Service {
	s.Spec.SessionAffinity = a
	if timeout != nil {
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: timeout}}
	}
	return s
}

func withExternalIPs(s *corev1.Service, ips ...string) *corev1.Service {
	s.Spec.ExternalIPs = ips
	return s
}

func withSourceRanges(s *corev1.Service, ranges ...string) *corev1.Service {
	s.Spec.LoadBalancerSourceRanges = ranges
	return s
}

func withIngress(s *corev1.Service, ings ...corev1.LoadBalancerIngress) *corev1.Service {
	s.Status.LoadBalancer.Ingress = ings
	return s
}

func ingress(ip string, mode *corev1.LoadBalancerIPMode) corev1.LoadBalancerIngress {
	return corev1.LoadBalancerIngress{IP: ip, IPMode: mode}
}

func withTrafficDistribution(s *corev1.Service, td string) *corev1.Service {
	s.Spec.TrafficDistribution = &td
	return s
}

func withNodePort(p corev1.ServicePort, nodePort int32) corev1.ServicePort {
	p.NodePort = nodePort
	return p
}

// Endpoint modifiers.

var on = testkit.OnNode

func zoneHints(e discoveryv1.Endpoint, zones ...string) discoveryv1.Endpoint {
	if e.Hints == nil {
		e.Hints = &discoveryv1.EndpointHints{}
	}
	for _, z := range zones {
		e.Hints.ForZones = append(e.Hints.ForZones, discoveryv1.ForZone{Name: z})
	}
	return e
}

func nodeHints(e discoveryv1.Endpoint, nodes ...string) discoveryv1.Endpoint {
	if e.Hints == nil {
		e.Hints = &discoveryv1.EndpointHints{}
	}
	for _, n := range nodes {
		e.Hints.ForNodes = append(e.Hints.ForNodes, discoveryv1.ForNode{Name: n})
	}
	return e
}

// node builds a Node; zone "" leaves the zone label out. addrs are
// "Type=address" pairs for status.addresses.
var node = testkit.Node

// nodeA is the node most cases run on: node-a in zone-a.
func nodeA() []*corev1.Node { return []*corev1.Node{node("node-a", "zone-a")} }

// nodePortSvc is web as a NodePort Service: port 80, nodePort 30080.
func nodePortSvc() *corev1.Service {
	return withType(svc("default/web", "10.96.0.10", withNodePort(sport("http", tcp, 80), 30080)), corev1.ServiceTypeNodePort)
}
