package datapath

import (
	"net/netip"
	"testing"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// Since Linux 6.1 a hash map element a writer deletes can be handed to the
// next insert at once (bpf_mem_alloc), so a hook holding its pointer may read
// another key's value. These tests write such a value in place, as the
// recycling would leave it, and check the hook never uses it: the draw must
// not land on the other Service's pod.

// twoServices programs A and B and returns them as the maps hold them.
func twoServices(t *testing.T, d *Datapath) (a, b Service) {
	t.Helper()
	fa := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80")
	fb := frontend("10.96.0.11", 80, servicemap.TCP, "10.244.2.2:80")
	mustApply(t, d, state(fa, fb))
	p := d.Programmed()
	return p[fa.Key], p[fb.Key]
}

func TestRecycledSlotOfAnotherServiceIsNotUsed(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	a, b := twoServices(t, d)
	// A's only slot now holds what B's slot holds.
	sk := socklbbpf.SocklbSlotKey{SvcId: a.ID, Generation: a.Generation, Slot: 0}
	if err := d.t.slots.Put(sk, socklbbpf.SocklbSlotValue{BackendId: b.BackendIDs[0], SvcId: b.ID, Generation: b.Generation}); err != nil {
		t.Fatal(err)
	}
	r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1)
	if r.verdict != verdictRefuse {
		t.Fatalf("A's slot holding B's value: verdict %d -> %s (B's pod is 10.244.2.2:80), want a refusal after the retries", r.verdict, r.addrPort)
	}
}

func TestRecycledBackendOfAnotherServiceIsNotUsed(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	a, b := twoServices(t, d)
	// A's backend id now holds B's backend.
	be := socklbbpf.SocklbBackend{Addr: addrBytes(netip.MustParseAddr("10.244.2.2")), Port: portToMap(80), Proto: uint8(servicemap.TCP), Id: b.BackendIDs[0]}
	if err := d.t.backends.Put(a.BackendIDs[0], be); err != nil {
		t.Fatal(err)
	}
	r := run(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1)
	if r.verdict != verdictRefuse {
		t.Fatalf("A's backend holding B's value: verdict %d -> %s (B's pod is 10.244.2.2:80), want a refusal after the retries", r.verdict, r.addrPort)
	}
}
