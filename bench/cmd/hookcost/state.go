package main

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/servicemap"
)

// Every Service has endpointsPerService endpoints, as in issue #12 and
// bench/cmd/socklb-bench. They are the lab's pods: a connect through any
// Service lands on a live server.
const endpointsPerService = 10

// measuredVIP is the ClusterIP the connects go to; the other n-1 Services
// only fill the maps. It has a UDP port too, for the datagram path.
var measuredVIP = netip.MustParseAddr("10.96.0.10")

const (
	vipTCPPort = 80
	vipUDPPort = 53
)

// desired builds n TCP Services (ClusterIPs 10.96.0.10 onward, up to
// 10.111.x.y for 1M) of endpointsPerService backends each on pods, plus a
// UDP port on the measured one and one LB IP with source ranges.
func desired(n int, pods []netip.Addr, tcpPort, udpPort uint16) (servicemap.State, error) {
	if len(pods) != endpointsPerService {
		return nil, fmt.Errorf("need %d pods, got %d", endpointsPerService, len(pods))
	}
	tcp := make([]servicemap.Backend, len(pods))
	udp := make([]servicemap.Backend, len(pods))
	for i, p := range pods {
		tcp[i] = servicemap.Backend{Addr: p, Port: tcpPort}
		udp[i] = servicemap.Backend{Addr: p, Port: udpPort}
	}
	s := make(servicemap.State, n+1)
	base := measuredVIP.As4()
	first := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
	for i := 0; i < n; i++ {
		v := first + uint32(i)
		vip := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		name := types.NamespacedName{Namespace: "hookcost", Name: fmt.Sprintf("svc-%d", i)}
		addFrontend(s, servicemap.Frontend{Key: servicemap.FrontendKey{Addr: vip, Port: vipTCPPort, Proto: servicemap.TCP},
			Service: name, PortName: "tcp", Backends: tcp})
		if i == 0 {
			addFrontend(s, servicemap.Frontend{Key: servicemap.FrontendKey{Addr: vip, Port: vipUDPPort, Proto: servicemap.UDP},
				Service: name, PortName: "udp", Backends: udp})
		}
	}
	// A LoadBalancer IP with loadBalancerSourceRanges, never connected to:
	// the egress hook is attached only while such a frontend exists, and
	// what it costs the packets of every other socket is measured so.
	addFrontend(s, servicemap.Frontend{Key: servicemap.FrontendKey{Addr: rangedLBIP, Port: vipTCPPort, Proto: servicemap.TCP},
		Service: types.NamespacedName{Namespace: "hookcost", Name: "ranged"}, PortName: "tcp", Backends: tcp,
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	return s, nil
}

// rangedLBIP is the LB IP of the one frontend with source ranges.
var rangedLBIP = netip.MustParseAddr("203.0.113.10")

func addFrontend(s servicemap.State, fe servicemap.Frontend) { s[fe.Key] = fe }
