package datapath

import (
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// These tests run lb.h, the code every hook runs, through SEC("syscall")
// wrappers under BPF_PROG_TEST_RUN, against maps written by Apply.

func TestTranslateHit(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	mustApply(t, d, state(frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.11:8080")))

	r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1)
	if r.verdict != verdictXlated || r.addrPort != netip.MustParseAddrPort("10.244.1.11:8080") {
		t.Fatalf("got verdict %d -> %s, want translated to 10.244.1.11:8080", r.verdict, r.addrPort)
	}
	svc := d.Programmed()[servicemap.FrontendKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 80, Proto: servicemap.TCP}]
	if r.backendID != svc.BackendIDs[0] {
		t.Errorf("backend id %d, want %d", r.backendID, svc.BackendIDs[0])
	}
	c, _, err := backendCounters(d.t, r.backendID)
	if err != nil || c != 1 {
		t.Errorf("connect counter = %d (%v), want 1", c, err)
	}
}

func TestTranslateMiss(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	mustApply(t, d, state(frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.11:8080")))

	for _, tc := range []struct {
		name  string
		dst   string
		proto servicemap.Protocol
	}{
		{"other address", "10.96.0.11:80", servicemap.TCP},
		{"other port", "10.96.0.10:81", servicemap.TCP},
		{"other protocol", "10.96.0.10:80", servicemap.UDP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := netip.MustParseAddrPort(tc.dst)
			r := run(t, p.TestTranslateConnect, dst, tc.proto, 1)
			if r.verdict != verdictPass || r.addrPort != dst {
				t.Fatalf("got verdict %d -> %s, want untouched %s", r.verdict, r.addrPort, dst)
			}
		})
	}
}

func TestTranslateNoBackendsRefuses(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	mustApply(t, d, state(frontend("10.96.0.20", 80, servicemap.TCP)))

	r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.20:80"), servicemap.TCP, 1)
	if r.verdict != verdictRefuse {
		t.Fatalf("verdict %d, want refuse (%d)", r.verdict, verdictRefuse)
	}
}

func TestTranslateSCTPAndDatagramCounter(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	mustApply(t, d, state(
		frontend("10.96.0.30", 53, servicemap.UDP, "10.244.1.11:5353"),
		frontend("10.96.0.30", 9000, servicemap.SCTP, "10.244.1.12:9000"),
	))
	r := run(t, p.TestTranslateDatagram, netip.MustParseAddrPort("10.96.0.30:53"), servicemap.UDP, 7)
	if r.verdict != verdictXlated || r.addrPort.String() != "10.244.1.11:5353" {
		t.Fatalf("UDP: verdict %d -> %s", r.verdict, r.addrPort)
	}
	if c, dg, _ := backendCounters(d.t, r.backendID); c != 0 || dg != 1 {
		t.Errorf("counters connects=%d datagrams=%d, want 0 and 1", c, dg)
	}
	r = run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.30:9000"), servicemap.SCTP, 7)
	if r.verdict != verdictXlated || r.addrPort.String() != "10.244.1.12:9000" {
		t.Fatalf("SCTP: verdict %d -> %s", r.verdict, r.addrPort)
	}
}

func TestRevNATEntryWritten(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	mustApply(t, d, state(frontend("10.96.0.10", 53, servicemap.UDP, "10.244.1.11:5353", "10.244.1.12:5353")))
	const cookie = 4242
	vip := netip.MustParseAddrPort("10.96.0.10:53")

	r := run(t, p.TestTranslateDatagram, vip, servicemap.UDP, cookie)
	if r.verdict != verdictXlated {
		t.Fatalf("verdict %d", r.verdict)
	}
	var st socklbbpf.SocklbSockState
	if err := p.TestSocks.Lookup(uint64(cookie), &st); err != nil {
		t.Fatalf("no socket state for cookie %d: %v", cookie, err)
	}
	e := st.E[0]
	if be := netip.AddrPortFrom(addrFromBytes(e.Backend), portFromMap(e.BackendPort)); be != r.addrPort {
		t.Fatalf("socket state names backend %s, the datagram went to %s", be, r.addrPort)
	}
	// What recvmsg4 and getpeername4 do with a reply from that backend:
	back := run(t, p.TestRevnat, r.addrPort, servicemap.UDP, cookie)
	if back.verdict != 1 || back.addrPort != vip {
		t.Fatalf("revnat of %s gave %d -> %s, want %s", r.addrPort, back.verdict, back.addrPort, vip)
	}
	// Another socket's reply from the same backend is not rewritten.
	other := run(t, p.TestRevnat, r.addrPort, servicemap.UDP, cookie+1)
	if other.verdict != 0 || other.addrPort != r.addrPort {
		t.Fatalf("revnat for an unrelated socket rewrote %s to %s", r.addrPort, other.addrPort)
	}
}

// TestTranslateUniform checks the draw is uniform over the backends, as
// kube-proxy's 1/(n-i) probability chain is. Pearson's chi-square with
// k-1 = 4 degrees of freedom; the threshold is the value a uniform draw
// exceeds with probability 1e-6, so this test fails by chance about once in
// a million runs.
func TestTranslateUniform(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	bes := []string{"10.244.1.1:80", "10.244.1.2:80", "10.244.1.3:80", "10.244.1.4:80", "10.244.1.5:80"}
	mustApply(t, d, state(frontend("10.96.0.10", 80, servicemap.TCP, bes...)))

	const runs = 20000
	seen := map[netip.AddrPort]int{}
	for i := 0; i < runs; i++ {
		r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, uint64(i))
		seen[r.addrPort]++
	}
	if len(seen) != len(bes) {
		t.Fatalf("draws landed on %v, want exactly the %d backends", seen, len(bes))
	}
	exp := float64(runs) / float64(len(bes))
	var chi2 float64
	for _, n := range seen {
		chi2 += (float64(n) - exp) * (float64(n) - exp) / exp
	}
	crit := chiSquareCritical(len(bes)-1, 1e-6)
	t.Logf("distribution %v, chi2=%.2f (critical %.2f at p=1e-6)", seen, chi2, crit)
	if chi2 > crit {
		t.Fatalf("backend choice is not uniform: chi2=%.2f > %.2f; counts %v", chi2, crit, seen)
	}
}

// chiSquareCritical solves P(X > x) = p for X ~ chi2(df), df even, whose
// survival function has the closed form e^{-x/2} sum_{i<df/2} (x/2)^i / i!.
func chiSquareCritical(df int, p float64) float64 {
	surv := func(x float64) float64 {
		term, sum := 1.0, 0.0
		for i := 0; i < df/2; i++ {
			if i > 0 {
				term *= (x / 2) / float64(i)
			}
			sum += term
		}
		return math.Exp(-x/2) * sum
	}
	lo, hi := 0.0, 1000.0
	for i := 0; i < 200; i++ {
		mid := (lo + hi) / 2
		if surv(mid) > p {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// TestTranslateDuringChurn hammers the translation while another thread
// rewrites the service's backend set, growing and shrinking it. Every draw
// must land on a backend that is in some set the writer wrote: never a
// miss, never a refusal, never an address from a half-written service.
//
// The draws last as long as the churn they are to race takes, not a
// number fixed in advance that a busy machine might finish before the
// writer has run: at least minDraws, and on until the writer has flipped
// minFlips times since the first draw and the draws have landed in every
// set it writes. maxDraws only ends a test whose writer never gets there.
func TestTranslateDuringChurn(t *testing.T) {
	const minDraws, minFlips, maxDraws = 50000, 100, 5000000
	d := openTest(t, Config{})
	p := testProgs(t, d)
	vip := netip.MustParseAddrPort("10.96.0.10:80")
	sizes := []int{1, 20, 2, 13, 1, 7, 3}
	sets := make([]servicemap.Frontend, len(sizes))
	valid := map[netip.AddrPort]int{} // backend -> its set, from 1
	for i, n := range sizes {
		var bes []string
		for j := 0; j < n; j++ {
			ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i + 1), byte(j + 1)}), 8080)
			bes = append(bes, ap.String())
			valid[ap] = i + 1
		}
		sets[i] = frontend("10.96.0.10", 80, servicemap.TCP, bes...)
	}
	mustApply(t, d, state(sets[0]))

	var stop atomic.Bool
	var flips atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; !stop.Load(); i++ {
			if err := d.Apply(state(sets[i%len(sets)])).Err(); err != nil {
				t.Errorf("Apply: %v", err)
				return
			}
			flips.Add(1)
		}
	}()
	first := flips.Load()
	seen := map[int]bool{}
	draws, bad := 0, 0
	for ; draws < maxDraws && (draws < minDraws || flips.Load()-first < minFlips || len(seen) < len(sets)); draws++ {
		r := run(t, p.TestTranslateConnect, vip, servicemap.TCP, uint64(draws))
		set := valid[r.addrPort]
		if r.verdict != verdictXlated || set == 0 {
			bad++
			if bad < 5 {
				t.Errorf("draw %d during churn: verdict %d -> %s", draws, r.verdict, r.addrPort)
			}
			continue
		}
		seen[set] = true
	}
	flipped := flips.Load() - first
	stop.Store(true)
	wg.Wait()
	t.Logf("%d draws across %d backend-set flips, in %d of the %d sets, %d bad", draws, flipped, len(seen), len(sets), bad)
	if flipped < minFlips || len(seen) < len(sets) {
		t.Errorf("%d draws saw %d of the %d backend sets across %d flips (want every set, at least %d flips): the test did not race churn",
			draws, len(seen), len(sets), flipped, minFlips)
	}
}
