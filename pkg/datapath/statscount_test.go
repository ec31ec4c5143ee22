package datapath

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// echoObjects is the real-node test's Service (tests/node, newEcho): TCP 80
// and UDP 53, both to port 9376 of the pods, so each pod is a backend of
// two frontends under the same address and port.
func echoObjects(eps ...discoveryv1.Endpoint) servicemap.ServiceObjects {
	tcp, udp := testkit.ServicePort("tcp", corev1.ProtocolTCP, 80), testkit.ServicePort("udp", corev1.ProtocolUDP, 53)
	ports := []discoveryv1.EndpointPort{testkit.EndpointPort("tcp", corev1.ProtocolTCP, 9376), testkit.EndpointPort("udp", corev1.ProtocolUDP, 9376)}
	return servicemap.ServiceObjects{
		Service: testkit.Service("default/echo", "10.96.0.10", tcp, udp),
		Slices:  []*discoveryv1.EndpointSlice{testkit.EndpointSlice("default/echo-abc", "echo", discoveryv1.AddressTypeIPv4, ports, eps...)},
	}
}

// connectCounts translates n connects to vip with the hooks' function and
// returns how many reached each backend, as a client counts its answers.
func connectCounts(t *testing.T, d *Datapath, vip netip.AddrPort, n int, cookie uint64) map[servicemap.Backend]uint64 {
	t.Helper()
	p := testProgs(t, d)
	out := map[servicemap.Backend]uint64{}
	for i := range n {
		r := run(t, p.TestTranslateConnect, vip, servicemap.TCP, cookie+uint64(i))
		if r.verdict != verdictXlated {
			t.Fatalf("connect %d to %s: verdict %d, want translated", i, vip, r.verdict)
		}
		out[servicemap.Backend{Addr: r.addrPort.Addr(), Port: r.addrPort.Port()}]++
	}
	return out
}

// backendConnects reads one frontend's per-backend connects, once through
// Dump (what `socklb inspect` prints) and once through ServiceStats (what
// the metrics export), and fails when the two disagree.
func backendConnects(t *testing.T, d *Datapath, dir string, key servicemap.FrontendKey) map[servicemap.Backend]uint64 {
	t.Helper()
	of := func(ds []ServiceDump) map[servicemap.Backend]uint64 {
		out := map[servicemap.Backend]uint64{}
		for _, s := range ds {
			if s.Frontend.Key == key {
				for _, b := range s.Backends {
					out[b.Backend] = b.Connects
				}
			}
		}
		return out
	}
	dump, err := Dump(dir)
	if err != nil {
		t.Fatal(err)
	}
	held, err := d.ServiceStats()
	if err != nil {
		t.Fatal(err)
	}
	inspect, metrics := of(dump), of(held)
	for b, n := range inspect {
		if metrics[b] != n || len(metrics) != len(inspect) {
			t.Fatalf("%s: Dump (inspect) says %v, ServiceStats (metrics) %v", key, inspect, metrics)
		}
	}
	return inspect
}

// TestStatsFollowEndpointsBecomingReady: the agent's path on a real node
// (Tracker deltas applied with ApplyDelta), with the pods of a Service
// becoming Ready one after the other. Each connect the hook translates
// counts once for the backend it chose, exactly; adding a third backend
// leaves the survivors' counts alone, as Cilium keeps per-backend metrics
// across Service updates (a backend's counter lives as long as it stays a
// backend of that frontend).
func TestStatsFollowEndpointsBecomingReady(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir})
	node := model.Input{Nodes: []*corev1.Node{testkit.Node("node-a", "")}, NodeName: "node-a"}
	nn := types.NamespacedName{Namespace: "default", Name: "echo"}
	var tr servicemap.Tracker
	st, _ := tr.Full(node)
	mustApply(t, d, st)
	sync := func(o servicemap.ServiceObjects) {
		t.Helper()
		delta, _, ok := tr.Update(node, map[types.NamespacedName]servicemap.ServiceObjects{nn: o})
		if !ok {
			t.Fatal("Tracker.Update asked for a full sync with unchanged node facts")
		}
		if err := d.ApplyDelta(delta).Err(); err != nil {
			t.Fatal(err)
		}
	}
	a, b, c := "10.244.1.12", "10.244.1.11", "10.244.1.13" // b sorts before a: the set reorders
	sync(echoObjects(testkit.NotReadyEndpoint(a), testkit.NotReadyEndpoint(b)))
	sync(echoObjects(testkit.ReadyEndpoint(a), testkit.NotReadyEndpoint(b)))
	sync(echoObjects(testkit.ReadyEndpoint(a), testkit.ReadyEndpoint(b)))

	vip := netip.MustParseAddrPort("10.96.0.10:80")
	key := servicemap.FrontendKey{Addr: vip.Addr(), Port: vip.Port(), Proto: servicemap.TCP}
	be := func(ip string) servicemap.Backend {
		return servicemap.Backend{Addr: netip.MustParseAddr(ip), Port: 9376}
	}
	client := connectCounts(t, d, vip, 100, 1000)
	got := backendConnects(t, d, dir, key)
	for _, ip := range []string{a, b} {
		if got[be(ip)] != client[be(ip)] {
			t.Errorf("backend %s: %d connects counted, the client reached it %d times (all: counted %v, client %v)", be(ip), got[be(ip)], client[be(ip)], got, client)
		}
	}

	sync(echoObjects(testkit.ReadyEndpoint(a), testkit.ReadyEndpoint(b), testkit.ReadyEndpoint(c)))
	kept := backendConnects(t, d, dir, key)
	for _, ip := range []string{a, b} {
		if kept[be(ip)] != got[be(ip)] {
			t.Errorf("backend %s had %d connects, %d after a third backend was added", be(ip), got[be(ip)], kept[be(ip)])
		}
	}
	more := connectCounts(t, d, vip, 60, 2000)
	now := backendConnects(t, d, dir, key)
	for _, ip := range []string{a, b, c} {
		if now[be(ip)] != kept[be(ip)]+more[be(ip)] {
			t.Errorf("backend %s: %d connects counted, want %d before + %d since", be(ip), now[be(ip)], kept[be(ip)], more[be(ip)])
		}
	}
}

// TestReusedBackendIDCountsFromZero: the stats array keeps a slot per
// backend id, and a removed backend's slot keeps its counts; once the
// allocator hands that id to a new backend (after it rested: ids run to
// twice --max-backends), the new backend's counters start from zero, not
// from its predecessor's.
func TestReusedBackendIDCountsFromZero(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir, MaxServices: 8, MaxBackends: 4})
	old := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	mustApply(t, d, state(old))
	first := d.Programmed()[old.Key].BackendIDs
	vip := netip.AddrPortFrom(old.Key.Addr, old.Key.Port)
	if n := connectCounts(t, d, vip, 20, 1000); n[old.Backends[0]]+n[old.Backends[1]] != 20 {
		t.Fatalf("20 connects counted as %v", n)
	}
	// Ids run 1..8 with room for 4 backends (a change writes its new
	// backends beside the old ones): the fifth pair takes the first
	// pair's ids again.
	for i, ip := range []string{"10.244.2.", "10.244.3.", "10.244.4.", "10.244.5."} {
		fe := frontend("10.96.0.10", 80, servicemap.TCP, ip+"1:80", ip+"2:80")
		mustApply(t, d, state(fe))
		if i == 3 {
			if ids := d.Programmed()[fe.Key].BackendIDs; !slices.Equal(ids, first) {
				t.Fatalf("ids %v, want the first pair's %v again (the allocator's wrap changed?)", ids, first)
			}
			for b, n := range backendConnects(t, d, dir, fe.Key) {
				if n != 0 {
					t.Errorf("backend %s took a reused id and shows %d connects before any, its predecessor's", b, n)
				}
			}
		}
	}
}
