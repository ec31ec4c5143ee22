package datapath

import (
	"net/netip"
	"testing"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestRemoteNodePortTranslatedAtConnect: a socket dialling another node's
// address at a NodePort is sent to a backend of the wildcard NodePort
// frontend while node_addrs lists that address, and left alone (to cross
// to that node) once it does not; an address no node has, and a port that
// is no NodePort, are left alone. IPv4 and IPv6.
func TestRemoteNodePortTranslatedAtConnect(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	v4 := nodePort(netip.IPv4Unspecified(), 30080, servicemap.TCP, "10.244.2.5:8080")
	v6 := nodePort(netip.IPv6Unspecified(), 30080, servicemap.TCP, "[fd00:244:2::5]:8080")
	mustApply(t, d, state(v4, v6))
	remote := []netip.Addr{netip.MustParseAddr("10.250.0.12"), netip.MustParseAddr("fd00:250::12")}
	if err := d.SetNodeAddresses(nil, remote); err != nil {
		t.Fatal(err)
	}
	check := connectChecker(t, p)
	check("10.250.0.12:30080", xlated("10.244.2.5:8080"))
	check("[fd00:250::12]:30080", xlated("[fd00:244:2::5]:8080"))
	check("10.250.0.13:30080", pass)
	check("10.250.0.12:30081", pass)
	check("0.0.0.0:30080", pass)

	// node 2 left the cluster: its address is no node's any more.
	if err := d.SetNodeAddresses(nil, remote[1:]); err != nil {
		t.Fatal(err)
	}
	check("10.250.0.12:30080", pass)
	check("[fd00:250::12]:30080", xlated("[fd00:244:2::5]:8080"))
}

// TestNodePortAtNodeAddresses: a NodePort is one frontend per port, at the
// unspecified address, reached at each of this node's NodePort addresses
// (node_addrs, NODE_ADDR_LOCAL), localhost included, and at the other
// nodes' unless it is LocalNodeOnly (externalTrafficPolicy Local); a
// frontend of the address itself (an externalIP) wins over the NodePort,
// as KUBE-NODEPORTS comes last in KUBE-SERVICES; an address taken off the
// list reaches nothing. IPv4 and IPv6.
func TestNodePortAtNodeAddresses(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	cluster := nodePort(netip.IPv4Unspecified(), 30080, servicemap.TCP, "10.244.2.5:8080")
	cluster6 := nodePort(netip.IPv6Unspecified(), 30080, servicemap.TCP, "[fd00:244:2::5]:8080")
	local := nodePort(netip.IPv4Unspecified(), 30081, servicemap.TCP, "10.244.2.6:8080")
	local.LocalNodeOnly = true
	shadowed := nodePort(netip.IPv4Unspecified(), 30083, servicemap.TCP, "10.244.2.7:8080")
	ext := frontend("192.168.1.5", 30083, servicemap.TCP, "10.244.3.1:8080")
	ext.Kind = servicemap.KindExternalIP
	mustApply(t, d, state(cluster, cluster6, local, shadowed, ext))
	own := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("192.168.1.5"), netip.MustParseAddr("fd00:1::5")}
	remote := []netip.Addr{netip.MustParseAddr("10.250.0.12")}
	if err := d.SetNodeAddresses(own, remote); err != nil {
		t.Fatal(err)
	}
	check := connectChecker(t, p)
	check("192.168.1.5:30080", xlated("10.244.2.5:8080"))
	check("127.0.0.1:30080", xlated("10.244.2.5:8080"))
	check("[fd00:1::5]:30080", xlated("[fd00:244:2::5]:8080"))
	check("10.250.0.12:30080", xlated("10.244.2.5:8080"))
	check("192.168.1.5:30081", xlated("10.244.2.6:8080"))
	check("10.250.0.12:30081", pass) // LocalNodeOnly: that node decides
	check("192.168.1.5:30082", pass) // no NodePort there
	check("192.168.1.5:30083", xlated("10.244.3.1:8080"))
	check("192.168.1.6:30080", pass) // no node's address

	if err := d.SetNodeAddresses(own[:1], remote); err != nil {
		t.Fatal(err)
	}
	check("192.168.1.5:30080", pass)
	check("127.0.0.1:30080", xlated("10.244.2.5:8080"))
	if n := countKeys[socklbbpf.SocklbNodeAddrKey](t, d.t.nodeAddrs); n != 2 {
		t.Errorf("node_addrs holds %d addresses, want 2", n)
	}
	// An address that moves from another node to this one changes flag.
	if err := d.SetNodeAddresses(append(own[:1:1], remote...), nil); err != nil {
		t.Fatal(err)
	}
	check("10.250.0.12:30081", xlated("10.244.2.6:8080"))
}

// connectChecker runs TestTranslateConnect for a TCP socket to dst and
// compares its verdict (and, translated, its destination) with want.
func connectChecker(t *testing.T, p *socklbbpf.SocklbTestObjects) func(dst string, want result) {
	return func(dst string, want result) {
		t.Helper()
		got := run(t, p.TestTranslateConnect, netip.MustParseAddrPort(dst), servicemap.TCP, 1)
		if got.verdict != want.verdict || (want.verdict == verdictXlated && got.addrPort != want.addrPort) {
			t.Errorf("connect %s: verdict %d to %s, want %d to %s", dst, got.verdict, got.addrPort, want.verdict, want.addrPort)
		}
	}
}

func xlated(s string) result {
	return result{verdict: verdictXlated, addrPort: netip.MustParseAddrPort(s)}
}

var pass = result{verdict: verdictPass}
