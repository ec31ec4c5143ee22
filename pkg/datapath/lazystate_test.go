package datapath

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestSocketStateOnlyForServices: the hooks run for every socket of the
// cgroup, most of which talk to pod IPs, not Services. Allocating socket
// storage for those is cost with no use (nothing ever reads it: getpeername,
// recvmsg and the socket iterators look for a Service's entry), so state is
// made only when a Service is translated. A refused connect makes none
// either.
func TestSocketStateOnlyForServices(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	mustApply(t, d, state(
		frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.11:8080"),
		frontend("10.96.0.11", 53, servicemap.UDP, "10.244.1.11:5353"),
		frontend("10.96.0.20", 80, servicemap.TCP),
	))

	for _, c := range []struct {
		name    string
		prog    *ebpf.Program
		dst     string
		proto   servicemap.Protocol
		verdict uint32
	}{
		{"connect to a pod IP", p.TestTranslateConnect, "10.244.1.11:8080", servicemap.TCP, uint32(verdictPass)},
		{"datagram to a pod IP", p.TestTranslateDatagram, "10.244.1.11:5353", servicemap.UDP, uint32(verdictPass)},
		{"connect to a Service with no endpoints", p.TestTranslateConnect, "10.96.0.20:80", servicemap.TCP, uint32(verdictRefuse)},
	} {
		const cookie = 5001
		r := run(t, c.prog, netip.MustParseAddrPort(c.dst), c.proto, cookie)
		if uint32(r.verdict) != c.verdict {
			t.Fatalf("%s: verdict %d, want %d", c.name, r.verdict, c.verdict)
		}
		var st socklbbpf.SocklbSockState
		if err := p.TestSocks.Lookup(uint64(cookie), &st); !errors.Is(err, ebpf.ErrKeyNotExist) {
			t.Fatalf("%s: the socket got state it will never use (lookup: %v)", c.name, err)
		}
	}

	// A datagram translated through a Service does get it (a TCP connect
	// keeps its state in sock_conns instead: TestTCPConnectRecordsInSockConns).
	for i, c := range []struct {
		prog  *ebpf.Program
		dst   string
		proto servicemap.Protocol
	}{
		{p.TestTranslateDatagram, "10.96.0.11:53", servicemap.UDP},
	} {
		cookie := uint64(6001 + i)
		if r := run(t, c.prog, netip.MustParseAddrPort(c.dst), c.proto, cookie); r.verdict != verdictXlated {
			t.Fatalf("%s: verdict %d", c.dst, r.verdict)
		}
		var st socklbbpf.SocklbSockState
		if err := p.TestSocks.Lookup(cookie, &st); err != nil {
			t.Fatalf("%s: translated, but no socket state to show the frontend to getpeername/recvmsg: %v", c.dst, err)
		}
	}
}
