package integration

import (
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
)

// TestPodOwnLoopbackNodePortUntouched: kube-proxy's localhost NodePorts live
// in the host's network namespace only (route_localnet). Inside a pod,
// 127.0.0.1:<nodePort> is the pod's own loopback: a pod listening there
// must get its own connections, even while the node serves that NodePort on
// 127.0.0.1. Were they translated, 30 connects would land on the three pods'
// 8080 servers (all on pod1 with probability 3^-30).
func TestPodOwnLoopbackNodePortUntouched(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "np", clusterIPs: []string{vip}, typ: "NodePort", nodePort: 30080}.yaml(allReady("node-a")...),
	}, "--nodeport-addresses", "127.0.0.0/8")
	e.waitInspect(10*time.Second, "127.0.0.1:30080/TCP")
	if _, err := e.lab.StartServer("pod1", "tcp", 30080); err != nil {
		t.Fatal(err)
	}
	pod1 := &lab.Client{Name: "pod1", NetNS: e.lab.Pod("pod1").NetNS}
	res := tcpN(t, e, pod1, "127.0.0.1:30080", 30)
	if res.OK != 30 || res.Replies["pod1"] != 30 {
		t.Fatalf("pod1 dialing its own 127.0.0.1:30080: replies %v errors %v, want all 30 from its own listener", res.Replies, res.Errors)
	}
	if res.Peer != "127.0.0.1:30080" {
		t.Errorf("getpeername %q, want 127.0.0.1:30080", res.Peer)
	}
}
