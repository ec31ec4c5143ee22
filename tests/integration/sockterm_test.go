package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/tests/lab"
)

type runOut struct {
	res *lab.Result
	err error
}

// holdUDP runs a DNS-like client in the background: one connected UDP
// socket to the VIP's port 53, n queries 300 ms apart, kept until it fails.
func holdUDP(e *env, n int) <-chan runOut {
	done := make(chan runOut, 1)
	go func() {
		r, err := e.client().RunResult(e.ctx(), e.cg, "udp-connected", "--addr", vip+":53",
			"--count", fmt.Sprint(n), "--interval", "300ms", "--seq")
		done <- runOut{r, err}
	}()
	return done
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
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a")),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:53/UDP", "10.244.1.11:5353")

	done := holdUDP(e, 10)
	waitAnswered(t, e, "pod1")
	e.writeManifest("svc.yaml", svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.12", "node-a")))
	e.waitInspect(2*time.Second, "10.244.1.12:5353")
	removedAt := e.lab.Counts("udp")["pod1"]

	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	seq := o.res.Sequence
	t.Logf("answers: %s", strings.Join(seq, " "))
	if len(seq) != 10 || seq[0] != "pod1" {
		t.Fatalf("sequence %v: want 10 answers starting on pod1", seq)
	}
	if seq[len(seq)-1] != "pod2" {
		t.Fatalf("the held socket never moved to pod2: %v (agent log:\n%s)", seq, e.agentLog())
	}
	if n := e.lab.Counts("udp")["pod1"]; n != removedAt {
		t.Errorf("pod1 received %d datagrams after its removal was applied", n-removedAt)
	}
	if !strings.Contains(e.agentLog(), "sockets_destroyed=1") {
		t.Errorf("agent did not report destroying the socket:\n%s", e.agentLog())
	}
}

// TestUnconnectedUDPSocketSurvives: a resolver's unconnected socket has no
// peer; removing a backend must not destroy it (Cilium #48564).
func TestUnconnectedUDPSocketSurvives(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a"), readyEP("10.244.1.12", "node-a")),
	})
	e.waitInspect(10*time.Second, "10.244.1.12:5353")
	done := make(chan *lab.Result, 1)
	go func() {
		r, err := e.client().RunResult(e.ctx(), e.cg, "udp", "--addr", vip+":53", "--count", "1")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	<-done
	// Run a longer unconnected client across a removal.
	go func() {
		r, err := e.client().RunResult(e.ctx(), e.cg, "udp", "--addr", vip+":53", "--count", "40")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	time.Sleep(100 * time.Millisecond)
	e.writeManifest("svc.yaml", svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.12", "node-a")))
	r := <-done
	if r == nil || r.OK != 40 || r.TotalErrors() != 0 {
		t.Fatalf("unconnected socket across a backend removal: %+v", r)
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

	done := holdUDP(e, 20)
	waitAnswered(t, e, "pod1")
	if res := tcpN(t, e, e.client(), vip+":80", 300); res.OK != 300 {
		t.Fatalf("300 TCP connects: replies %v errors %v", res.Replies, res.Errors)
	}
	e.writeManifest("svc.yaml", svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.12", "node-a")))
	e.waitInspect(2*time.Second, "10.244.1.12:5353")

	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	seq := o.res.Sequence
	if len(seq) != 20 || seq[0] != "pod1" || seq[len(seq)-1] != "pod2" {
		t.Fatalf("answers %v: want 20 starting on pod1 and ending on pod2, the held socket moved off the removed pod", seq)
	}
}
