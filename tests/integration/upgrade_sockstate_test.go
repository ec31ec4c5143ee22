package integration

import (
	"syscall"
	"testing"
	"time"
)

// TestConnectedUDPMovedOffAfterLayoutChange: socket termination finds a
// socket by its sk_state, so a connected UDP socket opened before an
// upgrade that changed struct sock_state must still be moved off its pod
// when that pod leaves the Service afterwards: its state was carried into
// the new map. Without the carry the socket stays on the removed pod.
func TestConnectedUDPMovedOffAfterLayoutChange(t *testing.T) {
	changed := layoutChangedBin(t)
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "dns", clusterIPs: []string{vip}}.yaml(readyEP("10.244.1.11", "node-a")),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:53/UDP", "10.244.1.11:5353")
	gen := waitGeneration(t, e, served{})

	// 24 s: a restart into another layout and a sync on a loaded machine.
	done := holdUDP(e, 80, "300ms")
	waitAnswered(t, e, "pod1")
	e.stopAgent(syscall.SIGTERM)
	e.startAgentBin(changed)
	waitGeneration(t, e, gen)

	seq, removedAt := moveToPod2(t, e, done)
	if len(seq) == 0 || seq[0] != "pod1" {
		t.Fatalf("sequence %v: want answers starting on pod1", seq)
	}
	if seq[len(seq)-1] != "pod2" {
		t.Fatalf("the socket held across the upgrade never moved to pod2: %v (agent log:\n%s)", seq, e.agentLog())
	}
	if n := e.lab.Counts("udp")["pod1"]; n != removedAt {
		t.Errorf("pod1 received %d datagrams after its removal was applied", n-removedAt)
	}
	if e.waitLog(5*time.Second, destroyedRE) == nil {
		t.Errorf("the agent did not report destroying the socket:\n%s", e.agentLog())
	}
}
