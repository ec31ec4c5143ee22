package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/lab"
)

// These tests run each kube-proxy rule of servicemap against real sockets.

var dualPods = []lab.PodSpec{
	{Name: "pod1", IP: "10.244.1.11", IPv6: "fd00::11"},
	{Name: "pod2", IP: "10.244.1.12", IPv6: "fd00::12"},
	{Name: "pod3", IP: "10.244.1.13", IPv6: "fd00::13"},
}

func allReady(node string) []ep {
	return []ep{readyEP("10.244.1.11", node), readyEP("10.244.1.12", node), readyEP("10.244.1.13", node)}
}

func startWith(t *testing.T, pods []lab.PodSpec, files map[string]string, agentArgs ...string) *env {
	e := newEnv(t, pods...)
	for name, body := range files {
		e.writeManifest(name, body)
	}
	e.startAgent(agentArgs...)
	return e
}

func tcpN(t *testing.T, e *env, c *lab.Client, addr string, n int) *lab.Result {
	t.Helper()
	res, err := c.TCP(e.ctx(), e.cg, addr, n)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAffinityPerClientNamespace: with sessionAffinity ClientIP, one client
// namespace keeps its pod over 100 connections; different client
// namespaces are spread. 13 clients all landing on one of 3 pods has
// probability 3^-12 ≈ 2e-6.
func TestAffinityPerClientNamespace(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "sticky", clusterIPs: []string{vip}, affinity: true}.yaml(allReady("node-a")...),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.244.1.13:8080")
	res := tcpN(t, e, e.client(), vip+":80", 100)
	if res.OK != 100 || len(res.Replies) != 1 {
		t.Fatalf("one client over 100 connects: replies %v errors %v, want all on one pod", res.Replies, res.Errors)
	}
	pods := map[string]bool{}
	for name := range res.Replies {
		pods[name] = true
	}
	for i := 2; i <= 13; i++ {
		c, err := e.lab.AddClient(fmt.Sprintf("c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		r := tcpN(t, e, c, vip+":80", 10)
		if r.OK != 10 || len(r.Replies) != 1 {
			t.Fatalf("client %d: replies %v errors %v, want 10 on one pod", i, r.Replies, r.Errors)
		}
		for name := range r.Replies {
			pods[name] = true
		}
	}
	if len(pods) < 2 {
		t.Fatalf("13 client namespaces all stuck to %v: affinity is not per client", pods)
	}
	t.Logf("13 client namespaces spread over %d pods", len(pods))
}

// TestTerminatingEndpointsServe: no ready endpoint, but serving and
// terminating ones: kube-proxy (KEP-1669) still sends traffic to them.
func TestTerminatingEndpointsServe(t *testing.T) {
	term := []ep{
		{ip: "10.244.1.11", node: "node-a", serving: true, terminating: true},
		{ip: "10.244.1.12", node: "node-a", serving: false, terminating: true},
	}
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "term", clusterIPs: []string{vip}}.yaml(term...),
	})
	e.waitInspect(10*time.Second, "10.244.1.11:8080")
	res := tcpN(t, e, e.client(), vip+":80", 20)
	if res.Replies["pod1"] != 20 {
		t.Fatalf("replies %v errors %v, want all 20 on the serving-terminating pod1", res.Replies, res.Errors)
	}
}

// TestInternalTrafficPolicyLocal: only endpoints on this node (node-a);
// with none local the connect fails with EHOSTUNREACH (kube-proxy drops).
func TestInternalTrafficPolicyLocal(t *testing.T) {
	mixed := []ep{readyEP("10.244.1.11", "node-a"), readyEP("10.244.1.12", "node-b"), readyEP("10.244.1.13", "node-a")}
	remote := []ep{readyEP("10.244.1.12", "node-b")}
	e := startWith(t, threePods, map[string]string{
		"local.yaml":  svcSpec{name: "local", clusterIPs: []string{vip}, itp: "Local"}.yaml(mixed...),
		"remote.yaml": svcSpec{name: "remote", clusterIPs: []string{"10.96.0.30"}, itp: "Local"}.yaml(remote...),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.96.0.30:80/TCP")
	res := tcpN(t, e, e.client(), vip+":80", 60)
	if res.OK != 60 || res.Replies["pod2"] != 0 || res.Replies["pod1"] == 0 || res.Replies["pod3"] == 0 {
		t.Fatalf("Local policy: replies %v errors %v, want pod1 and pod3 only", res.Replies, res.Errors)
	}
	res = tcpN(t, e, e.client(), "10.96.0.30:80", 3)
	if res.Errors["EHOSTUNREACH"] != 3 {
		t.Fatalf("Local policy, only remote endpoints: %v %v, want EHOSTUNREACH", res.Replies, res.Errors)
	}
}

// TestNodePortAndExternalIP: a NodePort answers on the node's address (from
// its Node object, filtered by --nodeport-addresses) and is programmed on
// 127.0.0.1 (kept by the filter, as kube-proxy requires; dialled from the
// host's namespace only, which TestLocalhostNodePortOnlyInHostNetns covers:
// from the client's namespace it is that namespace's own loopback); an
// externalIP and a LoadBalancer ingress IP answer on the Service port.
func TestNodePortAndExternalIP(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"node.yaml": nodeYAML("node-a", "192.168.50.10", "zone-a"),
		"svc.yaml": svcSpec{name: "np", clusterIPs: []string{vip}, typ: "LoadBalancer", nodePort: 30080,
			externalIPs: []string{"192.168.60.5"}, lbIngress: []string{"192.168.70.7"}}.yaml(allReady("node-a")...),
	}, "--nodeport-addresses", "192.168.50.0/24,127.0.0.0/8", "--external-ip-cidrs", "192.168.60.0/24")
	e.waitInspect(10*time.Second, "192.168.50.10:30080/TCP", "127.0.0.1:30080/TCP", "192.168.60.5:80/TCP", "192.168.70.7:80/TCP")
	for _, addr := range []string{"192.168.50.10:30080", "192.168.60.5:80", "192.168.70.7:80"} {
		res := tcpN(t, e, e.client(), addr, 30)
		if res.OK != 30 || len(res.Replies) < 2 {
			t.Errorf("%s: replies %v errors %v, want 30 answers spread over the pods", addr, res.Replies, res.Errors)
		}
		if res.Peer != addr {
			t.Errorf("%s: getpeername %q", addr, res.Peer)
		}
	}
	out := e.inspect()
	for _, kind := range []string{"NodePort", "ExternalIP", "LoadBalancer", "ClusterIP"} {
		if !contains(out, kind) {
			t.Errorf("inspect does not show kind %s:\n%s", kind, out)
		}
	}
}

// TestIPv6ClusterIP: a dual-stack Service answers on its IPv6 ClusterIP over
// TCP and UDP, with replies and getpeername showing the IPv6 ClusterIP.
func TestIPv6ClusterIP(t *testing.T) {
	const vip6 = "fd00:96::10"
	eps := append(allReady("node-a"), readyEP("fd00::11", "node-a"), readyEP("fd00::12", "node-a"), readyEP("fd00::13", "node-a"))
	e := startWith(t, dualPods, map[string]string{
		"svc.yaml": svcSpec{name: "dual", clusterIPs: []string{vip, vip6}}.yaml(eps...),
	})
	e.waitInspect(10*time.Second, "[fd00:96::10]:80/TCP", "[fd00::13]:8080")
	res := tcpN(t, e, e.client(), "["+vip6+"]:80", 60)
	if res.OK != 60 || len(res.Replies) != 3 || res.Peer != "["+vip6+"]:80" {
		t.Fatalf("IPv6 TCP: replies %v errors %v peer %q", res.Replies, res.Errors, res.Peer)
	}
	u, err := e.client().UDP(e.ctx(), e.cg, "["+vip6+"]:53", 30)
	if err != nil {
		t.Fatal(err)
	}
	if u.OK != 30 || len(u.Sources) != 1 || u.Sources[0] != "["+vip6+"]:53" {
		t.Fatalf("IPv6 UDP: ok %d sources %v errors %v", u.OK, u.Sources, u.Errors)
	}
	// The IPv4 family of the same Service works beside it.
	if r := tcpN(t, e, e.client(), vip+":80", 10); r.OK != 10 {
		t.Fatalf("IPv4 family of the dual-stack Service: %v", r.Errors)
	}
}

// TestV4MappedSocket: an AF_INET6 socket dialing ::ffff:10.96.0.10 (a
// dual-stack application reaching an IPv4 Service) is translated too.
func TestV4MappedSocket(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "v4", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
	})
	e.waitInspect(10*time.Second, "10.244.1.13:8080")
	res := tcpN(t, e, e.client(), "[::ffff:"+vip+"]:80", 30)
	if res.OK != 30 || len(res.Replies) < 2 {
		t.Fatalf("v4-mapped: replies %v errors %v (%s)", res.Replies, res.Errors, res.FirstError)
	}
	if res.Peer != "[::ffff:"+vip+"]:80" {
		t.Errorf("v4-mapped getpeername %q", res.Peer)
	}
}

// TestHostNSOnlyLeavesPodsAlone: with --socket-lb-hostns-only a client in
// a pod namespace is not translated (its sidecar proxy handles Services).
// The host-namespace side is covered by the test-run test: connecting
// from this machine's namespace to a pod address would leave the lab.
func TestHostNSOnlyLeavesPodsAlone(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "h", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
	}, "--socket-lb-hostns-only")
	e.waitInspect(10*time.Second, "10.244.1.13:8080")
	res := tcpN(t, e, e.client(), vip+":80", 3)
	if res.Errors["ENETUNREACH"] != 3 {
		t.Fatalf("pod-namespace client in hostns-only mode: replies %v errors %v, want untranslated (ENETUNREACH)", res.Replies, res.Errors)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestTopologyHintsPreferThisZone: every endpoint carries a zone hint and
// one names this node's zone (from its Node object): only that one is used,
// as kube-proxy does; a Service whose hints name no zone here uses all.
func TestTopologyHintsPreferThisZone(t *testing.T) {
	hinted := func(zones ...string) []ep {
		eps := allReady("node-a")
		for i := range eps {
			eps[i].zone = zones[i]
		}
		return eps
	}
	e := startWith(t, threePods, map[string]string{
		"node.yaml":  nodeYAML("node-a", "192.168.50.10", "zone-a"),
		"near.yaml":  svcSpec{name: "near", clusterIPs: []string{vip}}.yaml(hinted("zone-a", "zone-b", "zone-b")...),
		"other.yaml": svcSpec{name: "other", clusterIPs: []string{"10.96.0.50"}}.yaml(hinted("zone-c", "zone-b", "zone-b")...),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.96.0.50:80/TCP")
	if res := tcpN(t, e, e.client(), vip+":80", 30); res.Replies["pod1"] != 30 {
		t.Fatalf("hints for zone-a: replies %v errors %v, want all on pod1", res.Replies, res.Errors)
	}
	if res := tcpN(t, e, e.client(), "10.96.0.50:80", 60); len(res.Replies) != 3 {
		t.Fatalf("no hint for this zone: replies %v errors %v, want all three pods", res.Replies, res.Errors)
	}
}
