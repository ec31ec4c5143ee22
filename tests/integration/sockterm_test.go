package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/internal/lab"
)

type runOut struct {
	res *lab.Result
	err error
}

// holdUDP runs a DNS-like client in the background: one connected UDP
// socket to the VIP's port 53, n queries interval apart, kept until it
// fails (with "--hold", kept whatever fails).
func holdUDP(e *env, n int, interval string, extra ...string) <-chan runOut {
	done := make(chan runOut, 1)
	go func() {
		args := append([]string{"udp-connected", "--addr", vip + ":53",
			"--count", fmt.Sprint(n), "--interval", interval, "--seq"}, extra...)
		r, err := e.client().RunResult(e.ctx(), e.cg, args...)
		done <- runOut{r, err}
	}()
	return done
}

// heldAcrossRemoval serves the dns Service from pod1 alone, holds a
// connected UDP client on it (n queries interval apart, labclient's extra
// flags), moves the Service to pod2 once pod1 answered, and returns the
// client's answers and how many datagrams pod1 had when the move was in
// the maps.
func heldAcrossRemoval(t *testing.T, n int, interval string, extra ...string) (*env, []string, int64) {
	t.Helper()
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a")),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:53/UDP", "10.244.1.11:5353")
	done := holdUDP(e, n, interval, extra...)
	waitAnswered(t, e, "pod1")
	seq, removedAt := moveToPod2(t, e, done)
	return e, seq, removedAt
}

// moveToPod2 moves the dns Service from pod1 to pod2 while the held client
// runs, and returns the client's answers and how many datagrams pod1 had
// once the move (and the socket's destruction) was done.
func moveToPod2(t *testing.T, e *env, done <-chan runOut) ([]string, int64) {
	t.Helper()
	e.writeManifest("svc.yaml", svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.12", "node-a")))
	e.waitInspect(10*time.Second, "10.244.1.12:5353")
	// The sync logs after destroying the socket; a datagram the socket
	// sent before that rightly reached pod1.
	e.waitLog(10*time.Second, destroyedRE)
	removedAt := e.lab.Counts("udp")["pod1"]
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	t.Logf("answers: %s", strings.Join(o.res.Sequence, " "))
	return o.res.Sequence, removedAt
}

// waitAnswered waits until pod has answered a UDP query: the held socket
// is connected to it. A loaded machine can take over a second to start the
// client.
func waitAnswered(t *testing.T, e *env, pod string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); e.lab.Counts("udp")[pod] == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%s answered no query within 10 s", pod)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectedUDPMovedOffRemovedBackend: a DNS-like client keeps one
// connected UDP socket. When its backend leaves the Service, the agent
// destroys that socket (BPF socket iterator + bpf_sock_destroy), the client
// sees the error, reconnects, and lands on the live backend; the removed
// pod receives nothing after the removal.
func TestConnectedUDPMovedOffRemovedBackend(t *testing.T) {
	e, seq, removedAt := heldAcrossRemoval(t, 20, "300ms")
	if len(seq) != 20 || seq[0] != "pod1" {
		t.Fatalf("sequence %v: want 20 answers starting on pod1", seq)
	}
	if seq[len(seq)-1] != "pod2" {
		t.Fatalf("the held socket never moved to pod2: %v (agent log:\n%s)", seq, e.agentLog())
	}
	if n := e.lab.Counts("udp")["pod1"]; n != removedAt {
		t.Errorf("pod1 received %d datagrams after its removal was applied", n-removedAt)
	}
	if e.waitLog(5*time.Second, destroyedRE) == nil {
		t.Errorf("agent did not report destroying the socket:\n%s", e.agentLog())
	}
}

// TestUnconnectedUDPSocketSurvives: a resolver's unconnected socket has no
// peer; removing a backend must not destroy it (cilium/cilium#48564). One socket
// sends a query every 100 ms for 4 s and keeps one pod while that pod stays
// in the Service; its pod is removed while the socket is alive and sending,
// and the queries after that all reach the remaining pod through the same
// socket.
func TestUnconnectedUDPSocketSurvives(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a"), readyEP("10.244.1.12", "node-a")),
	})
	e.waitInspect(10*time.Second, "10.244.1.11:5353", "10.244.1.12:5353")
	done := make(chan runOut, 1)
	const queries = 40
	go func() {
		r, err := e.client().RunResult(e.ctx(), e.cg, "udp", "--addr", vip+":53",
			"--count", fmt.Sprint(queries), "--interval", "100ms", "--seq")
		done <- runOut{r, err}
	}()
	// Let the socket answer a few times and find the pod it keeps.
	var held, other string
	deadline := time.Now().Add(10 * time.Second)
	for held == "" {
		c := e.lab.Counts("udp")
		switch {
		case c["pod1"] >= 3:
			held, other = "pod1", "pod2"
		case c["pod2"] >= 3:
			held, other = "pod2", "pod1"
		case time.Now().After(deadline):
			t.Fatalf("the socket did not get 3 answers within 10 s: %v", c)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	keep := map[string]string{"pod1": "10.244.1.11", "pod2": "10.244.1.12"}[other]
	gone := map[string]string{"pod1": "10.244.1.11", "pod2": "10.244.1.12"}[held]
	e.writeManifest("svc.yaml", svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP(keep, "node-a")))
	for strings.Contains(e.inspect(), gone+":5353") {
		if time.Now().After(deadline) {
			t.Fatalf("the removal of %s was not applied within 10 s", held)
		}
		time.Sleep(20 * time.Millisecond)
	}
	removedAt := e.lab.Counts("udp")
	select {
	case o := <-done:
		t.Fatalf("the client finished before the removal was applied, so the test holds nothing: %+v %v", o.res, o.err)
	default:
	}
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	r := o.res
	if r.OK != queries || r.TotalErrors() != 0 {
		t.Fatalf("unconnected socket across a backend removal: %d of %d answered, errors %v (%s)", r.OK, queries, r.Errors, r.FirstError)
	}
	end := e.lab.Counts("udp")
	if end[held] != removedAt[held] {
		t.Errorf("%s got %d datagrams after its removal was applied", held, end[held]-removedAt[held])
	}
	if after := end[other] - removedAt[other]; after < 5 {
		t.Errorf("only %d queries went out after the removal: the socket did not keep sending across it", after)
	}
	if seq := r.Sequence; seq[len(seq)-1] != other {
		t.Errorf("last answer from %s, want %s: %v", seq[len(seq)-1], other, seq)
	}
}

// TestTerminateSocketsAllTCP: with --terminate-sockets=all a TCP socket
// socklb connected to a backend is destroyed when that backend leaves the
// Service (the application sees ECONNABORTED), while a socket connected to
// the same pod IP directly is left alone; with the default (udp) the TCP
// socket is left alone too, as conntrack leaves a TCP flow on a removed
// endpoint.
func TestTerminateSocketsAllTCP(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		destroyed bool
	}{{"all", true}, {"udp", false}} {
		t.Run(tc.mode, func(t *testing.T) {
			e := startWith(t, threePods, map[string]string{
				"svc.yaml": svcSpec{name: "web", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a")),
			}, "--terminate-sockets", tc.mode)
			e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.244.1.11:8080")
			type out struct {
				res *lab.Result
				err error
			}
			hold := func(addr string) <-chan out {
				ch := make(chan out, 1)
				go func() {
					r, err := e.client().RunResult(e.ctx(), e.cg, "tcp-hold", "--addr", addr, "--duration", "8s")
					ch <- out{r, err}
				}()
				return ch
			}
			viaVIP, direct := hold(vip+":80"), hold("10.244.1.11:8080")
			deadline := time.Now().Add(5 * time.Second)
			for e.lab.Counts("tcp")["pod1"] < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("the two sockets did not reach pod1: %v", e.lab.Counts("tcp"))
				}
				time.Sleep(20 * time.Millisecond)
			}
			removed := time.Now()
			e.writeManifest("svc.yaml", svcSpec{name: "web", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.12", "node-a")))
			e.waitInspect(10*time.Second, "10.244.1.12:8080")
			v, d := <-viaVIP, <-direct
			if v.err != nil || d.err != nil {
				t.Fatal(v.err, d.err)
			}
			if time.Since(removed) < 2*time.Second {
				t.Fatalf("the held sockets ended %s after the removal, before it could be checked", time.Since(removed))
			}
			if d.res.OK != 1 || d.res.TotalErrors() != 0 {
				t.Errorf("the socket connected to the pod IP directly was touched: %+v", d.res)
			}
			if tc.destroyed {
				if v.res.Errors["ECONNABORTED"] != 1 {
					t.Errorf("--terminate-sockets=all: the TCP socket through the ClusterIP to the removed pod was not destroyed: %+v\n%s", v.res, e.agentLog())
				}
				if e.waitLog(5*time.Second, destroyedRE) == nil {
					t.Errorf("the agent did not report destroying one socket:\n%s", e.agentLog())
				}
			} else if v.res.OK != 1 || v.res.TotalErrors() != 0 {
				t.Errorf("--terminate-sockets=udp destroyed a TCP socket: %+v", v.res)
			}
		})
	}
}

// TestSocketStateOutlivesOtherSockets: what socket termination needs to
// find a socket (which backend socklb sent it to) must last as long as the
// socket, however many other sockets come and go. An LRU keyed by socket
// cookie is never told a socket closed, so on a busy node it fills with
// dead sockets and evicts the live one: here 300 short TCP connections
// pass (through a 64-entry LRU on agents that have one, --max-revnat), and
// the held UDP socket must still be moved off its removed backend.
func TestSocketStateOutlivesOtherSockets(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a")),
	}, "--max-revnat", "64")
	e.waitInspect(10*time.Second, "10.96.0.10:53/UDP", "10.244.1.11:5353")

	done := holdUDP(e, 40, "300ms")
	waitAnswered(t, e, "pod1")
	if res := tcpN(t, e, e.client(), vip+":80", 300); res.OK != 300 {
		t.Fatalf("300 TCP connects: replies %v errors %v", res.Replies, res.Errors)
	}
	e.writeManifest("svc.yaml", svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.12", "node-a")))
	e.waitInspect(10*time.Second, "10.244.1.12:5353")

	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	seq := o.res.Sequence
	if len(seq) != 40 || seq[0] != "pod1" || seq[len(seq)-1] != "pod2" {
		t.Fatalf("answers %v: want 40 starting on pod1 and ending on pod2, the held socket moved off the removed pod", seq)
	}
}

// TestConnectedUDPKeepsTerminatingEndpoint: a connected UDP socket that
// never re-dials, sending every 200 ms, keeps its endpoint while that
// endpoint terminates but still serves and another is ready: kube-proxy
// clears a UDP flow only once its endpoint stops serving
// (conntrack.CleanStaleEntries), so the agent destroys nothing, and every
// query is answered, by the same pod, before and after the change.
func TestConnectedUDPKeepsTerminatingEndpoint(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a")),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:53/UDP", "10.244.1.11:5353")
	const queries = 30
	done := holdUDP(e, queries, "200ms")
	waitAnswered(t, e, "pod1")
	e.writeManifest("svc.yaml", svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(
		ep{ip: "10.244.1.11", node: "node-a", serving: true, terminating: true}, readyEP("10.244.1.12", "node-a")))
	e.waitInspect(10*time.Second, "10.244.1.12:5353")
	changedAt := e.lab.Counts("udp")["pod1"]

	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	seq := o.res.Sequence
	t.Logf("answers: %s", strings.Join(seq, " "))
	if o.res.OK != queries || slices.ContainsFunc(seq, func(p string) bool { return p != "pod1" }) {
		t.Errorf("the held socket: %d of %d answered, sequence %v, errors %v; want every answer from pod1, its terminating endpoint", o.res.OK, queries, seq, o.res.Errors)
	}
	if n := e.lab.Counts("udp")["pod1"]; n <= changedAt {
		t.Errorf("pod1 got no query after it started terminating (%d before, %d after)", changedAt, n)
	}
	if strings.Contains(e.agentLog(), "sockets_destroyed=1") {
		t.Errorf("the agent destroyed a socket of an endpoint that still serves:\n%s", e.agentLog())
	}
}

// TestConnectedUDPNeverRedialedAfterRemoval: what an application that
// dials once and never again (statsd, syslog) sees when its endpoint is
// removed: a deliberate difference. kube-proxy clears the flow and the
// next datagram goes to a live endpoint. A socket LB can move a socket
// only by destroying it (the kernel runs no sendmsg hook for a connected
// UDP socket's send, udp_sendmsg's `!connected`, and offers BPF no way to
// reconnect one): the destroyed socket is disconnected, so every later
// send fails with EDESTADDRREQ and the application must dial again. The
// removed pod receives nothing after the removal either way.
func TestConnectedUDPNeverRedialedAfterRemoval(t *testing.T) {
	e, seq, removedAt := heldAcrossRemoval(t, 25, "200ms", "--hold")
	i := slices.Index(seq, "EDESTADDRREQ")
	if seq[0] != "pod1" || i < 0 {
		t.Fatalf("sequence %v: want pod1 first, then EDESTADDRREQ once the socket is destroyed", seq)
	}
	for _, s := range seq[i:] {
		if s != "EDESTADDRREQ" {
			t.Errorf("after the socket was destroyed, a send gave %q; a disconnected UDP socket can only fail (sequence %v)", s, seq)
			break
		}
	}
	if n := e.lab.Counts("udp")["pod1"]; n != removedAt {
		t.Errorf("pod1 received %d datagrams after its removal was applied", n-removedAt)
	}
}

// TestEmptyUDPServiceRefusesAtConnect: a deliberate difference. Under
// kube-proxy a UDP socket connects to a Service without endpoints and
// learns of the REJECT from the ICMP error on its first datagram; when
// endpoints appear kube-proxy clears the flow and the same socket works.
// socklb answers at connect(): ECONNREFUSED at once (sendto too), since an
// untranslated socket would send toward the ClusterIP, which nothing
// translates per packet. An application that dials before its backend is
// ready must dial again; that dial then reaches the new endpoint.
func TestEmptyUDPServiceRefusesAtConnect(t *testing.T) {
	svc := svcSpec{name: "dns", clusterIPs: []string{vip}}
	e := startWith(t, threePods, map[string]string{"svc.yaml": svc.yaml()})
	e.waitInspect(10*time.Second, "10.96.0.10:53/UDP")
	for _, mode := range []string{"udp-connected", "udp"} {
		res, err := e.client().RunResult(e.ctx(), e.cg, mode, "--addr", vip+":53", "--count", "2")
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors["ECONNREFUSED"] != 2 {
			t.Errorf("%s to a UDP Service without endpoints: %v, errors %v; want ECONNREFUSED at once, twice", mode, res.Replies, res.Errors)
		}
	}
	e.writeManifest("svc.yaml", svc.yaml(readyEP("10.244.1.11", "node-a")))
	e.waitInspect(10*time.Second, "10.244.1.11:5353")
	res, err := e.client().UDPConnected(e.ctx(), e.cg, vip+":53", 3)
	if err != nil {
		t.Fatal(err)
	}
	if res.Replies["pod1"] != 3 {
		t.Errorf("a new dial once the endpoint exists: %v, errors %v; want 3 by pod1", res.Replies, res.Errors)
	}
}

// TestTCPStateOutlivesClosedSockets: a TCP socket connected through a
// Service keeps its state in sock_conns, an LRU keyed by socket cookie, and
// the sock_release hook deletes a socket's entry when it closes. So however
// many short connections come and go (300, through a 64-entry map), a held
// connection keeps the state getpeername and socket termination need, and
// the map holds no closed socket: here the held socket is still destroyed
// when its pod leaves, and once every client has closed, the map is empty.
// The same with the kernel's struct sock out of reach (kern_ctx: the hook
// then makes each closing socket's cookie to look it up).
func TestTCPStateOutlivesClosedSockets(t *testing.T) {
	for _, tc := range []struct{ name, disable string }{{"kern_ctx", ""}, {"no kern_ctx", "kern_ctx"}} {
		t.Run(tc.name, func(t *testing.T) { tcpStateOutlivesClosedSockets(t, tc.disable) })
	}
}

func tcpStateOutlivesClosedSockets(t *testing.T, disable string) {
	args := []string{"--terminate-sockets", "all", "--max-sockets", "64"}
	if disable != "" {
		args = append(args, "--disable-kernel-features", disable)
	}
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "web", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a")),
	}, args...)
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.244.1.11:8080")
	conns, err := ebpf.LoadPinnedMap(e.mapPin("sock_conns"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	if conns.MaxEntries() != 64 {
		t.Fatalf("sock_conns holds %d entries, want --max-sockets=64", conns.MaxEntries())
	}

	held := make(chan *lab.Result, 1)
	go func() {
		r, err := e.client().RunResult(e.ctx(), e.cg, "tcp-hold", "--addr", vip+":80", "--duration", "8s")
		if err != nil {
			t.Error(err)
		}
		held <- r
	}()
	deadline := time.Now().Add(5 * time.Second)
	for e.lab.Counts("tcp")["pod1"] < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the held socket did not reach pod1: %v", e.lab.Counts("tcp"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res := tcpN(t, e, e.client(), vip+":80", 300); res.OK != 300 {
		t.Fatalf("300 TCP connects: replies %v errors %v", res.Replies, res.Errors)
	}
	if n := countEntries(t, conns); n != 1 {
		t.Errorf("sock_conns holds %d entries with one socket open, want 1: closed sockets' entries were not deleted", n)
	}
	e.writeManifest("svc.yaml", svcSpec{name: "web", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.12", "node-a")))
	e.waitInspect(10*time.Second, "10.244.1.12:8080")
	r := <-held
	if r == nil {
		t.FailNow()
	}
	if r.Errors["ECONNABORTED"] != 1 {
		t.Errorf("the held TCP socket was not destroyed when its pod left (its sock_conns entry lost?): %+v\n%s", r, e.agentLog())
	}
	if n := countEntries(t, conns); n != 0 {
		t.Errorf("sock_conns holds %d entries after every socket closed, want 0", n)
	}
}

func countEntries(t *testing.T, m *ebpf.Map) int {
	t.Helper()
	var (
		k uint64
		n int
	)
	it := m.Iterate()
	for it.Next(&k, new(socklbbpf.SocklbSockEntry)) {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatalf("reading %s: %v", m, err)
	}
	return n
}
