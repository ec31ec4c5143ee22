package lab_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

// A NodePort test: the agent runs on node 1 with its tc programs on eth0
// (--devices: the per-packet path's flag, not in the agent yet);
// the outside machine connects to node 1's address; the test checks which
// pod answered and which source address that pod saw (the outside's own
// with externalTrafficPolicy Local, node 1's when SNATed to node 2's pod).
// Not run (it needs root and an agent binary); it shows the calls.
func ExampleNewMultiNode() {
	m, err := lab.NewMultiNode(lab.MultiNodeConfig{Nodes: 2, PodsPerNode: 2, IPv6: true})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	if err := m.StartAllServers(); err != nil { // TCP 8080, UDP 5353 in every pod
		panic(err)
	}
	n1 := m.Node(1)

	// The agent in node 1's namespace, with the caller's mounts (bpffs,
	// cgroup2); StartProcCmd kills it with the test.
	agent, err := testkit.StartProcCmd("agent-n1", "/tmp/agent-n1.log",
		n1.Command(context.Background(), "/path/to/socklb", "--devices", n1.Device.Name))
	if err != nil {
		panic(err)
	}
	defer agent.Stop(5 * time.Second)

	// A LoadBalancer IP, routed by the outside machine through node 1.
	if err := m.RouteVia(netip.MustParsePrefix("10.96.200.1/32"), 1); err != nil {
		panic(err)
	}

	ctx := context.Background()
	r, err := m.Outside.TCP(ctx, nil, netip.AddrPortFrom(n1.IP, 30080).String(), 10)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Replies)               // which pods answered
	fmt.Println(m.Peers("tcp")["n2-p1"]) // the source addresses n2-p1 saw
}
