package datapath

import (
	"net/netip"
	"testing"

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
	if err := d.SetRemoteNodeAddresses(remote); err != nil {
		t.Fatal(err)
	}
	check := func(dst string, want result) {
		t.Helper()
		got := run(t, p.TestTranslateConnect, netip.MustParseAddrPort(dst), servicemap.TCP, 1)
		if got.verdict != want.verdict || (want.verdict == verdictXlated && got.addrPort != want.addrPort) {
			t.Errorf("connect %s: verdict %d to %s, want %d to %s", dst, got.verdict, got.addrPort, want.verdict, want.addrPort)
		}
	}
	xlated := func(s string) result { return result{verdict: verdictXlated, addrPort: netip.MustParseAddrPort(s)} }
	pass := result{verdict: verdictPass}
	check("10.250.0.12:30080", xlated("10.244.2.5:8080"))
	check("[fd00:250::12]:30080", xlated("[fd00:244:2::5]:8080"))
	check("10.250.0.13:30080", pass)
	check("10.250.0.12:30081", pass)
	check("0.0.0.0:30080", pass)

	// node 2 left the cluster: its address is no node's any more.
	if err := d.SetRemoteNodeAddresses(remote[1:]); err != nil {
		t.Fatal(err)
	}
	check("10.250.0.12:30080", pass)
	check("[fd00:250::12]:30080", xlated("[fd00:244:2::5]:8080"))
}
