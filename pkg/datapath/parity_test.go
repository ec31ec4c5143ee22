package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

func TestAffinityKeepsClientOnBackend(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	fe := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80", "10.244.1.3:80", "10.244.1.4:80")
	fe.Affinity = 10800 * time.Second
	mustApply(t, d, state(fe))
	vip := netip.MustParseAddrPort("10.96.0.10:80")

	first := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 1001)
	for i := 0; i < 100; i++ {
		r := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, uint64(i+2), 1001)
		if r.addrPort != first.addrPort {
			t.Fatalf("connect %d of the same client went to %s, first went to %s", i, r.addrPort, first.addrPort)
		}
	}
	// Other clients are spread: 64 clients on 4 backends all landing on
	// one has probability 4 * (1/4)^64.
	seen := map[netip.AddrPort]bool{}
	for c := uint64(0); c < 64; c++ {
		seen[runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 2000+c).addrPort] = true
	}
	if len(seen) < 2 {
		t.Fatalf("64 distinct clients all went to %v", seen)
	}
}

func TestAffinityExpires(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	fe := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	fe.Affinity = 60 * time.Second
	mustApply(t, d, state(fe))
	vip := netip.MustParseAddrPort("10.96.0.10:80")
	first := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 7)
	svc := d.Programmed()[fe.Key]

	// Age the entry past the timeout and point it at the other backend:
	// an expired entry must not be honoured, so over many fresh picks
	// both backends appear again.
	other := fe.Backends[0]
	if svc.BackendIDs[0] == first.backendID {
		other = fe.Backends[1]
	}
	age := func() {
		k := netnsClient(7, svc.AffinityID)
		// boot time: long expired
		v := socklbbpf.SocklbAffinityValue{LastUsed: 1, Addr: addrBytes(other.Addr), Port: portToMap(other.Port)}
		if err := d.t.affinity.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint32]int{}
	for i := 0; i < 64; i++ {
		age()
		seen[runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 7).backendID]++
	}
	if len(seen) != 2 {
		t.Fatalf("with the entry expired every time, picks were %v: the expired entry was honoured", seen)
	}
	// A fresh entry is honoured and refreshed.
	k := netnsClient(7, svc.AffinityID)
	var v socklbbpf.SocklbAffinityValue
	if err := d.t.affinity.Lookup(k, &v); err != nil {
		t.Fatal(err)
	}
	r := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 7)
	want := netip.AddrPortFrom(addrFromBytes(v.Addr), portFromMap(v.Port))
	if r.addrPort != want {
		t.Fatalf("fresh affinity to %s not honoured: got %s", want, r.addrPort)
	}
}

func TestAffinityRepicksWhenBackendRemoved(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	fe := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	fe.Affinity = time.Hour
	mustApply(t, d, state(fe))
	vip := netip.MustParseAddrPort("10.96.0.10:80")
	first := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 9)

	var keep servicemap.Backend
	for _, b := range fe.Backends {
		if netip.AddrPortFrom(b.Addr, b.Port) != first.addrPort {
			keep = b
		}
	}
	fe.Backends = []servicemap.Backend{keep}
	mustApply(t, d, state(fe))
	for i := 0; i < 10; i++ {
		r := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 9)
		if r.verdict != verdictXlated || r.addrPort != netip.AddrPortFrom(keep.Addr, keep.Port) {
			t.Fatalf("after its backend left, the client got %d -> %s, want %s", r.verdict, r.addrPort, keep)
		}
	}
}

func TestPolicyDropIsUnreachable(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	fe := frontend("10.96.0.10", 80, servicemap.TCP)
	fe.PolicyDrop = true
	mustApply(t, d, state(fe))
	r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1)
	if r.verdict != verdictUnreach {
		t.Fatalf("verdict %d, want unreachable (%d)", r.verdict, verdictUnreach)
	}
}

func TestIPv6AndMappedLookups(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	mustApply(t, d, state(
		frontend("fd00:96::10", 80, servicemap.TCP, "[fd00:244::11]:8080"),
		frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.11:8080"),
	))
	r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("[fd00:96::10]:80"), servicemap.TCP, 1)
	if r.verdict != verdictXlated || r.addrPort.String() != "[fd00:244::11]:8080" {
		t.Fatalf("IPv6: %d -> %s", r.verdict, r.addrPort)
	}
	// What connect6 hands lb.h for an AF_INET6 socket dialing ::ffff:10.96.0.10.
	mapped := netip.AddrPortFrom(netip.MustParseAddr("::ffff:10.96.0.10"), 80)
	in := socklbbpf.SocklbTestTestCtx{Req: socklbbpf.SocklbTestLbReq{Addr: mapped.Addr().As16(), Port: portToMap(80), Proto: uint8(servicemap.TCP)}}
	var out socklbbpf.SocklbTestTestCtx
	if _, err := p.TestTranslateConnect.Run(&ebpf.RunOptions{Context: in, ContextOut: &out}); err != nil {
		t.Fatal(err)
	}
	got := netip.AddrFrom16(out.Req.Addr)
	if out.Verdict != verdictXlated || got != netip.MustParseAddr("::ffff:10.244.1.11") {
		t.Fatalf("v4-mapped: %d -> %s, want ::ffff:10.244.1.11 (mapped, for the AF_INET6 socket)", out.Verdict, got)
	}
	// An IPv6 address with the same low bits is not the IPv4 service.
	r = run(t, p.TestTranslateConnect, netip.MustParseAddrPort("[::10.96.0.10]:80"), servicemap.TCP, 1)
	if r.verdict != verdictPass {
		t.Fatalf("::10.96.0.10 matched the IPv4 service: %d -> %s", r.verdict, r.addrPort)
	}
}

func TestHostNSOnlySkipsOtherNamespaces(t *testing.T) {
	d := openTest(t, Config{})
	const host = 4096
	for _, tc := range []struct {
		name   string
		consts map[string]any
		client uint64
		skip   uint32
	}{
		{"mode off, pod netns", nil, 77, 0},
		{"mode on, host netns", map[string]any{"hostns_only": uint8(1), "host_netns_cookie": uint64(host)}, host, 0},
		{"mode on, pod netns", map[string]any{"hostns_only": uint8(1), "host_netns_cookie": uint64(host)}, 77, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProgsWith(t, d, tc.consts)
			r := runFrom(t, p.TestSkipNetns, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1, tc.client)
			if uint32(r.verdict) != tc.skip { // lb_skip_netns answers a boolean
				t.Fatalf("skip = %d, want %d", r.verdict, tc.skip)
			}
		})
	}
}
