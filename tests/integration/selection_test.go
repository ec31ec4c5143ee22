package integration

import (
	"fmt"
	"testing"
	"time"
)

// Which objects kube-proxy reads, and which copy of an endpoint it keeps:
// its informers' selectors (cmd/kube-proxy/app/server.go) and
// pkg/proxy/endpointslicecache.go, against real sockets.

// TestLabelsSelectAsKubeProxy: the headless label does not hide a Service
// that has a cluster IP, and a slice's copy of service-proxy-name does not
// hide its endpoints; the Service's own service-proxy-name label does hide
// the Service, and a slice's headless label hides that slice.
func TestLabelsSelectAsKubeProxy(t *testing.T) {
	e := startWith(t, threePods, map[string]string{
		"labelled.yaml": svcSpec{name: "labelled", clusterIPs: []string{vip},
			labels:      "service.kubernetes.io/headless: ''",
			sliceLabels: "service.kubernetes.io/service-proxy-name: other"}.yaml(allReady("node-a")...),
		"other.yaml": svcSpec{name: "other", clusterIPs: []string{"10.96.0.20"},
			labels: "service.kubernetes.io/service-proxy-name: other"}.yaml(allReady("node-a")...),
		"hslice.yaml": svcSpec{name: "hslice", clusterIPs: []string{"10.96.0.30"},
			sliceLabels: "service.kubernetes.io/headless: ''"}.yaml(allReady("node-a")...),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.96.0.30:80/TCP")
	if res := tcpN(t, e, e.client(), vip+":80", 30); res.OK != 30 || len(res.Replies) < 2 {
		t.Errorf("headless-labelled Service with a cluster IP: replies %v errors %v, want 30 answers spread over its pods", res.Replies, res.Errors)
	}
	if res := tcpN(t, e, e.client(), "10.96.0.20:80", 3); res.Errors["ENETUNREACH"] != 3 {
		t.Errorf("Service for another proxy: replies %v errors %v, want untranslated (ENETUNREACH)", res.Replies, res.Errors)
	}
	if res := tcpN(t, e, e.client(), "10.96.0.30:80", 3); res.Errors["ECONNREFUSED"] != 3 {
		t.Errorf("Service whose only slice is labelled headless: replies %v errors %v, want no endpoints (ECONNREFUSED)", res.Replies, res.Errors)
	}
}

// TestNotTerminatingCopyWins: pod1's IP is in two slices, terminating (and
// serving) in the old one and not ready in the new one, as when a pod IP is
// reused before the old Pod is gone. kube-proxy keeps the copy that is not
// terminating, whatever its readiness, so pod1 is not ready and not a
// terminating fallback; the only serving-terminating endpoint, pod2, gets
// every connection.
func TestNotTerminatingCopyWins(t *testing.T) {
	old := []ep{
		{ip: "10.244.1.11", node: "node-a", serving: true, terminating: true},
		{ip: "10.244.1.12", node: "node-a", serving: true, terminating: true},
	}
	e := startWith(t, threePods, map[string]string{
		"svc.yaml": svcSpec{name: "reuse", clusterIPs: []string{vip}}.yaml(old...),
		"new.yaml": sliceYAML("reuse-new", "reuse", ep{ip: "10.244.1.11", node: "node-a"}),
	})
	e.waitInspect(10*time.Second, "10.96.0.10:80/TCP", "10.244.1.12:8080")
	res := tcpN(t, e, e.client(), vip+":80", 30)
	if res.Replies["pod2"] != 30 {
		t.Fatalf("replies %v errors %v, want all 30 on pod2: pod1's not-terminating copy (not ready) hides its terminating one", res.Replies, res.Errors)
	}
}

// sliceYAML is one more IPv4 EndpointSlice of Service svc, with the ports
// svcSpec.yaml gives its own slices.
func sliceYAML(name, svc string, eps ...ep) string {
	s := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: default
  labels: {kubernetes.io/service-name: %s}
addressType: IPv4
ports:
- {name: tcp, port: 8080, protocol: TCP}
- {name: dns, port: 5353, protocol: UDP}
endpoints:
`, name, svc)
	for _, e := range eps {
		s += fmt.Sprintf("- addresses: [\"%s\"]\n  nodeName: %s\n  conditions: {ready: %t, serving: %t, terminating: %t}\n", e.ip, e.node, e.ready, e.serving, e.terminating)
	}
	return s
}
