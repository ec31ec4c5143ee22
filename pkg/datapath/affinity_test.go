package datapath

import (
	"net/netip"
	"testing"
	"time"

	"github.com/socklb/socklb/pkg/servicemap"
)

// TestAffinityNeverLeadsOutsideItsService: an affinity entry outlives its
// endpoint's membership, and what it names can come to belong to another
// Service: the endpoint (the address moves to B's pod) and the backend id
// (ids are reused). lb_sticky honours the entry only while members holds
// the endpoint under this Service's id, as Cilium checks an affinity entry
// against the Service's backends (lb_affinity_match). Here B ends up with
// that endpoint under that very id, so a check that ignored the Service
// id, by address or by id, would lead A's client to B's pod.
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
	const old, cur = "10.244.1.1:80", "10.244.1.2:80"

	mustApply(t, d, state(a(old)))
	first := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 1, 77)
	if first.addrPort.String() != old {
		t.Fatalf("first connect went to %s", first.addrPort)
	}
	// The endpoint leaves A and joins B, which churns until B's backend
	// for it has the id it had in A.
	mustApply(t, d, state(a(cur)))
	for i := 1; ; i++ {
		mustApply(t, d, state(a(cur), b(old)))
		if d.Programmed()[b(old).Key].BackendIDs[0] == first.backendID {
			break
		}
		if i == 10 {
			t.Fatalf("B's backend for %s never got id %d: the test did not reach the reuse it is about", old, first.backendID)
		}
		// Another pod in its place, so that the endpoint's next backend
		// takes the next id.
		mustApply(t, d, state(a(cur), b(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 9, byte(i)}), 80).String())))
	}

	r := runFrom(t, p.TestTranslateConnect, vip, servicemap.TCP, 2, 77)
	if r.verdict != verdictXlated || r.addrPort.String() != cur {
		t.Fatalf("the client's affinity led to verdict %d -> %s (backend id %d); A's only backend is %s", r.verdict, r.addrPort, r.backendID, cur)
	}
}

// TestAffinityIsPerServicePort: kube-proxy's `recent` lists live in the
// endpoint chains (KUBE-SEP-*), which the ClusterIP, NodePort, externalIP
// and LoadBalancer rules of one Service port all jump to, so a client keeps
// its pod whichever of them it dials. Another port of the Service is
// another set of chains.
func TestAffinityIsPerServicePort(t *testing.T) {
	d := openTest(t, Config{})
	p := testProgs(t, d)
	bes := []string{"10.244.1.1:80", "10.244.1.2:80", "10.244.1.3:80", "10.244.1.4:80"}
	port := func(vip string, vport uint16, kind servicemap.Kind, name string) servicemap.Frontend {
		fe := frontend(vip, vport, servicemap.TCP, bes...)
		fe.Service.Name, fe.PortName, fe.Kind, fe.Affinity = "web", name, kind, time.Hour
		return fe
	}
	cluster := port("10.96.0.10", 80, servicemap.KindClusterIP, "http")
	others := []servicemap.Frontend{
		port("127.0.0.1", 30080, servicemap.KindNodePort, "http"),
		port("192.168.5.1", 30080, servicemap.KindNodePort, "http"),
		port("192.0.2.10", 80, servicemap.KindExternalIP, "http"),
		port("203.0.113.7", 80, servicemap.KindLoadBalancer, "http"),
	}
	alt := port("10.96.0.10", 8080, servicemap.KindClusterIP, "alt")
	mustApply(t, d, state(append(others, cluster, alt)...))

	const client = 4242
	first := runFrom(t, p.TestTranslateConnect, netip.AddrPortFrom(cluster.Key.Addr, 80), servicemap.TCP, 1, client)
	for _, fe := range others {
		for i := 0; i < 20; i++ {
			r := runFrom(t, p.TestTranslateConnect, netip.AddrPortFrom(fe.Key.Addr, fe.Key.Port), servicemap.TCP, uint64(i+2), client)
			if r.addrPort != first.addrPort {
				t.Fatalf("client reached %s through the ClusterIP, then %s through %s %s", first.addrPort, r.addrPort, fe.Kind, fe.Key)
			}
		}
	}
	// The other port has its own entry: over 32 fresh clients that first
	// dial the ClusterIP port, the alt port does not always follow (it would
	// with probability (1/4)^32 if the entry were shared).
	same := 0
	for c := uint64(0); c < 32; c++ {
		a := runFrom(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:80"), servicemap.TCP, 1, 9000+c)
		b := runFrom(t, p.TestTranslateConnect, netip.MustParseAddrPort("10.96.0.10:8080"), servicemap.TCP, 1, 9000+c)
		if a.addrPort == b.addrPort {
			same++
		}
	}
	if same == 32 {
		t.Fatalf("32 clients landed on the same pod through port http and port alt: the two ports share an affinity entry")
	}
}

// TestAffinityIDsSurviveRestart: a new agent adopts the ports' affinity ids,
// so clients keep their pods across an upgrade, and a port added afterwards
// gets an id of its own.
func TestAffinityIDsSurviveRestart(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir})
	np := frontend("192.168.5.1", 30080, servicemap.TCP, "10.244.1.1:80")
	np.Service.Name, np.Kind = "svc-10.96.0.10", servicemap.KindNodePort
	ci := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80")
	mustApply(t, d, state(ci, np))
	before := d.Programmed()
	d.Close()

	d2 := openTest(t, Config{BPFFSPath: dir})
	after := d2.Programmed()
	if after[ci.Key].AffinityID != before[ci.Key].AffinityID || after[np.Key].AffinityID != after[ci.Key].AffinityID {
		t.Fatalf("affinity ids before %d/%d, after adoption %d/%d: want one id kept", before[ci.Key].AffinityID, before[np.Key].AffinityID, after[ci.Key].AffinityID, after[np.Key].AffinityID)
	}
	other := frontend("10.96.0.11", 80, servicemap.TCP, "10.244.1.2:80")
	mustApply(t, d2, state(ci, np, other))
	if id := d2.Programmed()[other.Key].AffinityID; id == after[ci.Key].AffinityID {
		t.Fatalf("another Service's port got the adopted affinity id %d", id)
	}
}
