package integration

import (
	"strings"
	"testing"
	"time"
)

// TestNodePortAddressesPrimary: --nodeport-addresses primary serves
// NodePorts on the Node object's primary address only, as kube-proxy v1.37
// expands the keyword (cmd/kube-proxy/app/server.go): not on 127.0.0.1,
// not on the machine's other interface addresses.
func TestNodePortAddressesPrimary(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"node.yaml": nodeYAML("node-a", "192.168.50.10", "zone-a"),
		"svc.yaml":  svcSpec{name: "np", clusterIPs: []string{vip}, typ: "NodePort", nodePort: 30080}.yaml(allReady("node-a")...),
	}, "--nodeport-addresses", "primary")
	out := e.waitInspect(10*time.Second, "192.168.50.10:30080/TCP", "10.244.1.13:8080")
	if res := tcpN(t, e, e.client(), "192.168.50.10:30080", 30); res.OK != 30 || len(res.Replies) < 2 {
		t.Errorf("primary address: replies %v errors %v, want 30 answers spread over the pods", res.Replies, res.Errors)
	}
	// A translated 127.0.0.1:30080 would reach a pod; untranslated it meets
	// the client namespace's own empty loopback.
	if res := tcpN(t, e, e.client(), "127.0.0.1:30080", 3); res.Errors["ECONNREFUSED"] != 3 {
		t.Errorf("127.0.0.1 with primary only: replies %v errors %v, want no NodePort there (ECONNREFUSED from the namespace's loopback)", res.Replies, res.Errors)
	}
	for _, line := range strings.Split(out, "\n") {
		// 0.0.0.0:30080 is the NodePort's one entry, which inspect shows
		// again at each address node_addrs leads to it (an indented
		// line names the entry).
		if strings.HasPrefix(line, " ") {
			continue
		}
		if strings.Contains(line, ":30080/TCP") && !strings.HasPrefix(line, "192.168.50.10:30080/TCP") && !strings.HasPrefix(line, "0.0.0.0:30080/TCP") {
			t.Errorf("NodePort served outside the primary address: %q", line)
		}
	}
}
