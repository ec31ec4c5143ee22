package integration

import (
	"testing"
	"time"
)

// TestExternalIPBeatsNodePort: Service zzz lists the node's address as an
// externalIP on port 80, and Service np has nodePort 80 (outside the API
// server's default range, which only a manifest can give; it makes the
// two keys equal with the lab's fixed ports). In kube-proxy's iptables mode
// (pkg/proxy/iptables/proxier.go) the externalIP rule sits in
// KUBE-SERVICES, before the last rule's jump to KUBE-NODEPORTS, so zzz's
// pod gets the connections.
func TestExternalIPBeatsNodePort(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"node.yaml": nodeYAML("node-a", "192.168.50.10", "zone-a"),
		"np.yaml": svcSpec{name: "np", clusterIPs: []string{vip}, typ: "NodePort", nodePort: 80}.yaml(
			readyEP("10.244.1.12", "node-a"), readyEP("10.244.1.13", "node-a")),
		"zzz.yaml": svcSpec{name: "zzz", clusterIPs: []string{"10.96.0.20"}, externalIPs: []string{"192.168.50.10"}}.yaml(
			readyEP("10.244.1.11", "node-a")),
	}, "--nodeport-addresses", "192.168.50.0/24")
	e.waitInspect(10*time.Second, "192.168.50.10:80/TCP", "10.96.0.20:80/TCP", "10.244.1.13:8080")
	res := tcpN(t, e, e.client(), "192.168.50.10:80", 20)
	if res.Replies["pod1"] != 20 {
		t.Fatalf("replies %v errors %v, want all 20 on pod1: the externalIP wins over the NodePort, as in iptables mode", res.Replies, res.Errors)
	}
}
