package datapath

import (
	"net/netip"
	"testing"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestUnconnectedUDPSticksPerSocket: under kube-proxy one socket sending to
// one Service port is one conntrack flow, so its datagrams stay on one pod
// (QUIC and DTLS over unconnected sockets rely on it). The socket keeps its
// backend while the backend stays in the Service and picks again only once
// it leaves; other sockets still spread.
func TestUnconnectedUDPSticksPerSocket(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	bes := []string{"10.244.1.1:53", "10.244.1.2:53", "10.244.1.3:53", "10.244.1.4:53"}
	fe := frontend("10.96.0.10", 53, servicemap.UDP, bes...)
	mustApply(t, d, state(fe))
	vip := netip.MustParseAddrPort("10.96.0.10:53")
	const sock = 77

	first := run(t, p.TestTranslateDatagram, vip, servicemap.UDP, sock)
	for i := 0; i < 50; i++ {
		if r := run(t, p.TestTranslateDatagram, vip, servicemap.UDP, sock); r.addrPort != first.addrPort {
			t.Fatalf("datagram %d of one socket went to %s, the first to %s", i+2, r.addrPort, first.addrPort)
		}
	}
	// Another backend leaving does not move the socket.
	var rest []string
	for _, b := range bes {
		if b != first.addrPort.String() {
			rest = append(rest, b)
		}
	}
	mustApply(t, d, state(frontend("10.96.0.10", 53, servicemap.UDP, append([]string{first.addrPort.String()}, rest[1:]...)...)))
	if r := run(t, p.TestTranslateDatagram, vip, servicemap.UDP, sock); r.addrPort != first.addrPort {
		t.Fatalf("after another backend left, the socket moved from %s to %s", first.addrPort, r.addrPort)
	}
	// Its own backend leaving: it picks again, then keeps the new one.
	mustApply(t, d, state(frontend("10.96.0.10", 53, servicemap.UDP, rest...)))
	second := run(t, p.TestTranslateDatagram, vip, servicemap.UDP, sock)
	if second.verdict != verdictXlated || second.addrPort == first.addrPort {
		t.Fatalf("after its backend %s left, the socket got verdict %d -> %s", first.addrPort, second.verdict, second.addrPort)
	}
	for i := 0; i < 20; i++ {
		if r := run(t, p.TestTranslateDatagram, vip, servicemap.UDP, sock); r.addrPort != second.addrPort {
			t.Fatalf("after re-picking %s, datagram %d went to %s", second.addrPort, i, r.addrPort)
		}
	}
	// Sockets are independent: 32 sockets on 3 backends all landing on one
	// has probability 3^-31.
	seen := map[netip.AddrPort]bool{}
	for s := uint64(0); s < 32; s++ {
		seen[run(t, p.TestTranslateDatagram, vip, servicemap.UDP, 1000+s).addrPort] = true
	}
	if len(seen) < 2 {
		t.Fatalf("32 sockets all went to %v", seen)
	}
}
