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

// TestSocketStateEvictionCounted: a socket holds state for 4 Service ports;
// a fifth overwrites the oldest, which the eviction counter reports, and
// the replies of the other four are still reverse-translated.
func TestSocketStateEvictionCounted(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	var fes []servicemap.Frontend
	for i := 0; i < 5; i++ {
		vip := netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + i)}).String()
		fes = append(fes, frontend(vip, 53, servicemap.UDP, netip.AddrFrom4([4]byte{10, 244, 1, byte(1 + i)}).String()+":53"))
	}
	mustApply(t, d, state(fes...))
	const sock = 5
	var backends []netip.AddrPort
	for i, fe := range fes {
		r := run(t, p.TestTranslateDatagram, netip.AddrPortFrom(fe.Key.Addr, 53), servicemap.UDP, sock)
		backends = append(backends, r.addrPort)
		ev, err := d.SocketStateEvents()
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(max(0, i-3)); ev.Evicted != want {
			t.Fatalf("after %d Service ports, evictions = %d, want %d", i+1, ev.Evicted, want)
		}
	}
	for i, be := range backends {
		back := run(t, p.TestRevnat, be, servicemap.UDP, sock)
		vip := netip.AddrPortFrom(fes[i].Key.Addr, 53)
		if i == 0 && back.verdict != 0 {
			t.Errorf("the evicted port's reply from %s was still rewritten to %s", be, back.addrPort)
		}
		if i > 0 && (back.verdict != 1 || back.addrPort != vip) {
			t.Errorf("reply from %s: verdict %d -> %s, want %s", be, back.verdict, back.addrPort, vip)
		}
	}
}
