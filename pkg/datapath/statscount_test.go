package datapath

import (
	"net/netip"
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

// TestLostCounterIsShownAndRestored: a live backend whose stats entry is
// gone is translated to but never counted (lb_count counts only into an
// existing entry), the shape of the real-node report's "connects 0". Dump
// and ServiceStats say the counter is missing instead of printing 0, and
// an agent restart (adopt) re-creates it without touching the other
// backends' counts.
func TestLostCounterIsShownAndRestored(t *testing.T) {
	dir := pinDir(t)
	d := openTest(t, Config{BPFFSPath: dir})
	fe := frontend("10.96.0.10", 80, servicemap.TCP, "10.244.1.1:80", "10.244.1.2:80")
	mustApply(t, d, state(fe))
	lost, kept := fe.Backends[0], fe.Backends[1]
	if err := d.t.stats.Delete(d.Programmed()[fe.Key].BackendIDs[0]); err != nil {
		t.Fatal(err)
	}
	vip := netip.AddrPortFrom(fe.Key.Addr, fe.Key.Port)
	before := connectCounts(t, d, vip, 40, 1000)
	if before[lost] == 0 || before[kept] == 0 {
		t.Fatalf("40 connects reached %v, want both backends", before)
	}
	for name, read := range map[string]func() ([]ServiceDump, error){"Dump": func() ([]ServiceDump, error) { return Dump(dir) }, "ServiceStats": d.ServiceStats} {
		ds, err := read()
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range ds[0].Backends {
			if b.NoCounter != (b.Backend == lost) {
				t.Errorf("%s: backend %s NoCounter %t, want %t", name, b.Backend, b.NoCounter, b.Backend == lost)
			}
		}
	}
	d.Close()

	d = openTest(t, Config{BPFFSPath: dir})
	after := connectCounts(t, d, vip, 40, 2000)
	got := backendConnects(t, d, dir, fe.Key)
	if got[lost] != after[lost] {
		t.Errorf("backend %s after the restart: %d connects counted, the client reached it %d times", lost, got[lost], after[lost])
	}
	if got[kept] != before[kept]+after[kept] {
		t.Errorf("backend %s: %d connects counted, want %d before the restart + %d after", kept, got[kept], before[kept], after[kept])
	}
}
