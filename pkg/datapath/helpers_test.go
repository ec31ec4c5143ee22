package datapath

import (
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/cilium/ebpf"
	"k8s.io/apimachinery/pkg/types"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/servicemap"
)

// lb_verdict of bpf/c/lb.h, emitted by bpf2go.
const (
	verdictPass    = socklbbpf.SocklbTestLbVerdictLB_PASS
	verdictXlated  = socklbbpf.SocklbTestLbVerdictLB_XLATED
	verdictRefuse  = socklbbpf.SocklbTestLbVerdictLB_REFUSE
	verdictUnreach = socklbbpf.SocklbTestLbVerdictLB_UNREACH
)

func requireRoot(t testing.TB) {
	t.Helper()
	testkit.RequireRoot(t, "loads BPF programs and pins maps on bpffs")
}

// pinDir is a fresh per-test directory on a bpffs instance of the test's
// own, so tests never touch the host's /sys/fs/bpf; unmounting it at the
// end drops anything Cleanup missed.
func pinDir(t testing.TB) string {
	t.Helper()
	dir := testkit.PrivateBPFFS(t).Path()
	// Registered after the unmount, so it runs before it.
	t.Cleanup(func() {
		if _, err := Cleanup(dir, false); err != nil {
			t.Errorf("cleanup of %s: %v", dir, err)
		}
	})
	return dir
}

// openTest opens a datapath that pins maps but attaches nothing.
func openTest(t testing.TB, cfg Config) *Datapath {
	t.Helper()
	requireRoot(t)
	if cfg.BPFFSPath == "" {
		cfg.BPFFSPath = pinDir(t)
	}
	d, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// testProgs loads the SEC("syscall") wrappers around lb.h, sharing d's maps.
func testProgs(t *testing.T, d *Datapath) *socklbbpf.SocklbTestObjects {
	t.Helper()
	return testProgsWith(t, d, nil)
}

// testProgsWith loads the wrappers with load-time constants set.
func testProgsWith(t *testing.T, d *Datapath, consts map[string]any) *socklbbpf.SocklbTestObjects {
	t.Helper()
	spec, err := socklbbpf.LoadSocklbTest()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			t.Fatalf("setting %s: %v", name, err)
		}
	}
	applySizes(spec.Maps, d.cfg)
	var objs socklbbpf.SocklbTestObjects
	err = spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: stateMaps(d.Maps())})
	if err != nil {
		t.Fatalf("loading test programs: %v", err)
	}
	t.Cleanup(func() { objs.Close() })
	return &objs
}

type result struct {
	verdict   socklbbpf.SocklbTestLbVerdict
	addrPort  netip.AddrPort
	backendID uint32
}

func run(t testing.TB, prog *ebpf.Program, dst netip.AddrPort, proto servicemap.Protocol, cookie uint64) result {
	return runFrom(t, prog, dst, proto, cookie, 0)
}

// runFrom runs prog for a socket of the network namespace client.
func runFrom(t testing.TB, prog *ebpf.Program, dst netip.AddrPort, proto servicemap.Protocol, cookie, client uint64) result {
	in := socklbbpf.SocklbTestTestCtx{Req: socklbbpf.SocklbTestLbReq{
		Addr:   addrBytes(dst.Addr()),
		Port:   portToMap(dst.Port()),
		Proto:  uint8(proto),
		Cookie: cookie,
		Client: client,
	}}
	var out socklbbpf.SocklbTestTestCtx
	if _, err := prog.Run(&ebpf.RunOptions{Context: in, ContextOut: &out}); err != nil {
		t.Fatalf("BPF_PROG_TEST_RUN: %v", err)
	}
	return result{
		verdict:   out.Verdict,
		addrPort:  netip.AddrPortFrom(addrFromBytes(out.Req.Addr), portFromMap(out.Req.Port)),
		backendID: out.Req.BackendId,
	}
}

// frontend builds a Frontend; backends are "ip:port" strings, given sorted.
func frontend(vip string, port uint16, proto servicemap.Protocol, backends ...string) servicemap.Frontend {
	fe := servicemap.Frontend{
		Key:      servicemap.FrontendKey{Addr: netip.MustParseAddr(vip), Port: port, Proto: proto},
		Service:  types.NamespacedName{Namespace: "default", Name: "svc-" + vip},
		PortName: "p",
	}
	for _, b := range backends {
		ap := netip.MustParseAddrPort(b)
		fe.Backends = append(fe.Backends, servicemap.Backend{Addr: ap.Addr(), Port: ap.Port()})
	}
	return fe
}

func state(fes ...servicemap.Frontend) servicemap.State {
	s := servicemap.State{}
	for _, fe := range fes {
		s[fe.Key] = fe
	}
	return s
}

func mustApply(t *testing.T, d *Datapath, s servicemap.State) ApplyResult {
	t.Helper()
	res := d.Apply(s)
	if err := res.Err(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

// netnsClient is the affinity key a hook writes for a socket's client, its
// network namespace cookie (lb_client_netns).
func netnsClient(cookie uint64, affinityID uint32) socklbbpf.SocklbAffinityKey {
	k := socklbbpf.SocklbAffinityKey{AffinityId: affinityID, By: socklbbpf.SocklbAffinityByAFFINITY_BY_NETNS}
	binary.NativeEndian.PutUint64(k.Client[:8], cookie)
	return k
}
