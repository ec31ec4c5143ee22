package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestAffinityNeverLeadsOutsideItsService: backend ids are reused, so an
// affinity entry naming its backend by id alone can, once the id is handed to
// another Service's pod, send the client there. Cilium checks an affinity
// entry against the Service's backends (lb_affinity_match); so must we.
func TestAffinityNeverLeadsOutsideItsService(t *testing.T) {
	// Three backends of capacity (A's, B's old and new while B is
	// switched): ids run 1..6 and are reused after that.
	d := openTest(t, Config{MaxBackends: 3})
	p := testProgs(t, d)
	vip := netip.MustParseAddrPort("10.96.0.10:80")
	a := func(be string) servicemap.Frontend {
		fe := frontend("10.96.0.10", 80, servicemap.TCP, be)
		fe.Affinity = time.Hour
		return fe
	}
	b := func(be string) servicemap.Frontend { return frontend("10.96.0.11", 80, servicemap.TCP, be) }

	mustApply(t, d, state(a("10.244.1.1:80")))
	first := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 77)
	if first.addrPort.String() != "10.244.1.1:80" {
		t.Fatalf("first connect went to %s", first.addrPort)
	}
	// 10.244.1.1 leaves A; B's pods churn until one gets its old id.
	mustApply(t, d, state(a("10.244.1.2:80")))
	for i := 1; ; i++ {
		pod := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 9, byte(i)}), 80).String()
		mustApply(t, d, state(a("10.244.1.2:80"), b(pod)))
		if d.Programmed()[b(pod).Key].BackendIDs[0] == first.backendID {
			break
		}
		if i == 10 {
			t.Fatalf("no pod of B reused id %d: the test did not reach the id reuse it is about", first.backendID)
		}
	}

	r := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 2, 77)
	if r.verdict != verdictXlated || r.addrPort.String() != "10.244.1.2:80" {
		t.Fatalf("the client's affinity led to verdict %d -> %s; A's only backend is 10.244.1.2:80", r.verdict, r.addrPort)
	}
}
