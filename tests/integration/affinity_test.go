package integration

import (
	"maps"
	"testing"
	"time"
)

// TestAffinityFollowsTheServicePort: kube-proxy keeps sessionAffinity in the
// endpoint chains (KUBE-SEP-*, pkg/proxy/iptables/proxier.go), which the
// ClusterIP, NodePort, externalIP and LoadBalancer rules of one Service port
// all jump to: a client that reached a pod through the ClusterIP keeps it
// through every other frontend of the port. With one entry per frontend the
// three others would all agree with the ClusterIP with probability 1/27.
func TestAffinityFollowsTheServicePort(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"node.yaml": nodeYAML("node-a", "192.168.50.10", "zone-a"),
		"svc.yaml": svcSpec{name: "sticky", clusterIPs: []string{vip}, typ: "LoadBalancer", nodePort: 30080, affinity: true,
			externalIPs: []string{"192.168.60.5"}, lbIngress: []string{"192.168.70.7"}}.yaml(allReady("node-a")...),
	}, "--nodeport-addresses", "192.168.50.0/24", "--external-ip-cidrs", "192.168.60.0/24")
	e.waitInspect(10*time.Second, "192.168.50.10:30080/TCP", "192.168.60.5:80/TCP", "192.168.70.7:80/TCP")
	first := tcpN(t, e, e.client(), vip+":80", 10)
	if first.OK != 10 || len(first.Replies) != 1 {
		t.Fatalf("ClusterIP: replies %v errors %v, want 10 on one pod", first.Replies, first.Errors)
	}
	for _, addr := range []string{"192.168.50.10:30080", "192.168.60.5:80", "192.168.70.7:80"} {
		res := tcpN(t, e, e.client(), addr, 10)
		// All 10 answered, by the ClusterIP's pod alone: a frontend that
		// answered nothing must not pass for one that agreed.
		if res.OK != 10 || len(res.Replies) != 1 || !maps.Equal(res.Replies, first.Replies) {
			t.Errorf("%s: replies %v errors %v; through the ClusterIP the client stuck to %v", addr, res.Replies, res.Errors, first.Replies)
		}
	}
}
