package integration

import (
	"testing"
	"time"
)

// TestOtherNodesNodePortTranslatedAtConnect: a connection from this node
// to another Node's address and a nodePort is translated at connect() to
// the Service's endpoints (servicemap's wildcard NodePort frontend, and the
// other Nodes' addresses the agent hands the datapath), instead of going
// through that node; an address no Node has is left alone; when the Node's
// address changes in its object, the old one is left alone and the new one
// translated. The client's namespace has no route to those addresses: an
// untranslated connect fails with ENETUNREACH and nothing leaves.
func TestOtherNodesNodePortTranslatedAtConnect(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"node-a.yaml": nodeYAML("node-a", "192.168.50.10", "zone-a"),
		"node-b.yaml": nodeYAML("node-b", "192.168.50.11", "zone-a"),
		"svc.yaml":    svcSpec{name: "np", clusterIPs: []string{vip}, typ: "NodePort", nodePort: 30080}.yaml(allReady("node-a")...),
	})
	e.waitInspect(10*time.Second, "0.0.0.0:30080/TCP", "10.244.1.13:8080")
	waitTCPAnswered(t, e, "192.168.50.11:30080", 2)
	waitUntranslated(t, e, "192.168.50.12:30080") // no Node has it
	waitUntranslated(t, e, "192.168.50.11:30081") // no nodePort there

	e.writeManifest("node-b.yaml", nodeYAML("node-b", "192.168.50.13", "zone-a"))
	waitTCPAnswered(t, e, "192.168.50.13:30080", 2)
	waitUntranslated(t, e, "192.168.50.11:30080")
}

// TestOtherNodesExternalIPTranslatedAtConnect: an externalIP that is
// another Node's address is translated at connect() on this node, as
// kube-proxy's OUTPUT chain does, instead of crossing to that node (which
// would capture it anyway). It follows the Node: when the address leaves
// it, connects to it are left alone again.
func TestOtherNodesExternalIPTranslatedAtConnect(t *testing.T) {
	const peer, moved, stranger = "192.168.50.11", "192.168.50.13", "192.168.50.12"
	e := startWith(t, threePods, map[string]string{
		"node-a.yaml": nodeYAML("node-a", "192.168.50.10", "zone-a"),
		"node-b.yaml": nodeYAML("node-b", peer, "zone-a"),
		"svc.yaml": svcSpec{name: "ext", clusterIPs: []string{vip},
			externalIPs: []string{peer, moved, stranger}}.yaml(allReady("node-a")...),
	})
	e.waitInspect(10*time.Second, peer+":80/TCP", "10.244.1.13:8080")
	waitTCPAnswered(t, e, peer+":80", 1)
	waitUntranslated(t, e, stranger+":80") // no Node has it: CVE-2020-8554
	waitUntranslated(t, e, moved+":80")

	e.writeManifest("node-b.yaml", nodeYAML("node-b", moved, "zone-a"))
	waitTCPAnswered(t, e, moved+":80", 1)
	waitUntranslated(t, e, peer+":80")
}

// waitTCPAnswered waits up to 10 s until 30 connects from the lab's client to
// addr are all answered, by at least pods different pods.
func waitTCPAnswered(t *testing.T, e *env, addr string, pods int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := tcpN(t, e, e.client(), addr, 30)
		if res.OK == 30 && len(res.Replies) >= pods {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: replies %v errors %v, want 30 answers from at least %d pods\nagent log:\n%s", addr, res.Replies, res.Errors, pods, e.agentLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitUntranslated waits up to 10 s until connects to addr are left alone:
// ENETUNREACH, since the client's namespace has no route there.
func waitUntranslated(t *testing.T, e *env, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		res := tcpN(t, e, e.client(), addr, 3)
		if res.Errors["ENETUNREACH"] == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: replies %v errors %v, want it left alone (ENETUNREACH: no route from the client)", addr, res.Replies, res.Errors)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
