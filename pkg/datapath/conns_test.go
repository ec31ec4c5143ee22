package datapath

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestTCPConnectRecordsInSockConns: a TCP connect through a Service keeps
// what getpeername needs in sock_conns, keyed by the socket's cookie, and
// creates no socket storage (the allocation that was two thirds of
// connect4's cost). Sockets that must own their state keep socket storage:
// UDP (replies are rewritten per datagram, an unconnected socket may use
// several Service ports) and TCP through loadBalancerSourceRanges (the
// egress hook finds those sockets by their storage).
func TestTCPConnectRecordsInSockConns(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	plain := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.11:8080")
	dns := frontend("10.96.0.11", 53, servicemap.UDP, "10.244.1.11:5353")
	ranged := frontend("192.0.2.10", 80, servicemap.TCP, "10.244.1.12:8080")
	ranged.SourceRanges = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}
	mustApply(t, d, state(plain, dns, ranged))

	for _, c := range []struct {
		name      string
		prog      *ebpf.Program
		dst       string
		proto     servicemap.Protocol
		inConns   bool
		srcCheck  bool
		cookie    uint64
		wantPeer  string
		otherPeer string
	}{
		{"TCP connect to a ClusterIP", p.TestTranslateConnect, "10.96.0.10:80", servicemap.TCP, true, false, 7001, "10.244.1.11:8080", "10.244.1.11:9090"},
		{"connected UDP", p.TestTranslateConnect, "10.96.0.11:53", servicemap.UDP, false, false, 7002, "10.244.1.11:5353", "10.244.1.11:5354"},
		{"UDP datagram", p.TestTranslateDatagram, "10.96.0.11:53", servicemap.UDP, false, false, 7003, "10.244.1.11:5353", "10.244.1.11:5354"},
		{"TCP connect through source ranges", p.TestTranslateConnect, "192.0.2.10:80", servicemap.TCP, false, true, 7004, "10.244.1.12:8080", "10.244.1.12:9090"},
	} {
		dst := netip.MustParseAddrPort(c.dst)
		r := run(t, c.prog, dst, c.proto, c.cookie)
		if r.verdict != verdictXlated || r.addrPort.String() != c.wantPeer {
			t.Fatalf("%s: verdict %d to %s, want %d to %s", c.name, r.verdict, r.addrPort, verdictXlated, c.wantPeer)
		}
		var e socklbbpf.SocklbSockEntry
		connErr := d.Maps().SockConns.Lookup(c.cookie, &e)
		var st socklbbpf.SocklbSockState
		stErr := p.TestSocks.Lookup(c.cookie, &st)
		if c.inConns {
			if connErr != nil {
				t.Fatalf("%s: no sock_conns entry for cookie %d: %v", c.name, c.cookie, connErr)
			}
			if be, fe := netip.AddrPortFrom(addrFromBytes(e.Backend), portFromMap(e.BackendPort)), netip.AddrPortFrom(addrFromBytes(e.Frontend), portFromMap(e.FrontendPort)); be != r.addrPort || fe != dst {
				t.Fatalf("%s: sock_conns says %s -> %s, the connect asked %s and went to %s", c.name, fe, be, dst, r.addrPort)
			}
			if !errors.Is(stErr, ebpf.ErrKeyNotExist) {
				t.Fatalf("%s: the socket got socket storage too (lookup: %v): the allocation sock_conns is there to avoid", c.name, stErr)
			}
		} else {
			if !errors.Is(connErr, ebpf.ErrKeyNotExist) {
				t.Fatalf("%s: wrote sock_conns (lookup: %v), want socket storage only", c.name, connErr)
			}
			if stErr != nil {
				t.Fatalf("%s: no socket storage: %v", c.name, stErr)
			}
			if got := st.SrcCheck != 0; got != c.srcCheck {
				t.Fatalf("%s: src_check %v, want %v", c.name, got, c.srcCheck)
			}
		}
		// getpeername (and recvmsg for UDP) on the socket shows the
		// frontend for its backend, and nothing else is rewritten.
		if back := run(t, p.TestRevnat, r.addrPort, c.proto, c.cookie); back.verdict != 1 || back.addrPort != dst {
			t.Fatalf("%s: getpeername of %s gave %d -> %s, want %s", c.name, r.addrPort, back.verdict, back.addrPort, dst)
		}
		other := netip.MustParseAddrPort(c.otherPeer)
		if back := run(t, p.TestRevnat, other, c.proto, c.cookie); back.verdict != 0 || back.addrPort != other {
			t.Fatalf("%s: getpeername of a peer the socket was not sent to (%s) gave %d -> %s", c.name, other, back.verdict, back.addrPort)
		}
		if back := run(t, p.TestRevnat, r.addrPort, c.proto, c.cookie+100); back.verdict != 0 {
			t.Fatalf("%s: another socket's getpeername of %s was rewritten to %s", c.name, r.addrPort, back.addrPort)
		}
	}
}

// TestMembersOnlyWhereRead: members are written for the frontends whose
// members something reads (sessionAffinity, UDP, every kind the per-packet
// path serves) and not for a TCP ClusterIP without sessionAffinity, most
// frontends of a cluster; turning sessionAffinity on writes them for the
// backends it keeps, turning it off removes them.
func TestMembersOnlyWhereRead(t *testing.T) {
	d := openTest(t, Config{})
	plain := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	dns := frontend("10.96.0.11", 53, servicemap.UDP, "10.244.1.3:53", "10.244.1.4:53")
	sticky := frontend("10.96.0.12", 80, servicemap.TCP, "10.244.1.5:80", "10.244.1.6:80")
	sticky.Affinity = 3 * time.Hour
	node := frontend("192.0.2.1", 30080, servicemap.TCP, "10.244.1.7:80", "10.244.1.8:80")
	node.Kind = servicemap.KindNodePort
	members := func(step string, want map[servicemap.FrontendKey]int) {
		t.Helper()
		got := map[uint32]int{}
		var k socklbbpf.SocklbMemberKey
		var v uint32
		it := d.t.members.Iterate()
		for it.Next(&k, &v) {
			got[k.SvcId]++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		prog := d.Programmed()
		for key, n := range want {
			if got[prog[key].ID] != n {
				t.Errorf("%s: %s has %d members, want %d", step, key, got[prog[key].ID], n)
			}
		}
	}
	mustApply(t, d, state(plain, dns, sticky, node))
	members("programmed", map[servicemap.FrontendKey]int{plain.Key: 0, dns.Key: 2, sticky.Key: 2, node.Key: 2})

	plain.Affinity = 3 * time.Hour
	plain.Backends = append(plain.Backends, servicemap.Backend{Addr: netip.MustParseAddr("10.244.1.9"), Port: 80})
	mustApply(t, d, state(plain, dns, sticky, node))
	members("sessionAffinity on, a backend added", map[servicemap.FrontendKey]int{plain.Key: 3})

	plain.Affinity = 0
	mustApply(t, d, state(plain, dns, sticky, node))
	members("sessionAffinity off", map[servicemap.FrontendKey]int{plain.Key: 0, sticky.Key: 2})
}
