package integration

import (
	"strings"
	"testing"
	"time"
)

// TestBadInputIsSkippedAndNamed: unusable objects and a file that does not
// parse are each reported with the object and the reason, and the good
// Service beside them works.
func TestBadInputIsSkippedAndNamed(t *testing.T) {
	bad := `apiVersion: v1
kind: Service
metadata: {name: badip, namespace: default}
spec:
  clusterIP: 10.96.0.300
  ports: [{name: tcp, port: 80, protocol: TCP}]
---
apiVersion: v1
kind: Service
metadata: {name: badproto, namespace: default}
spec:
  clusterIP: 10.96.0.31
  ports: [{name: icmp, port: 80, protocol: ICMP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: orphan, namespace: default}
addressType: IPv4
endpoints: [{addresses: [10.244.1.11]}]
`
	e := startWith(t, threePods, map[string]string{
		"good.yaml":   svcSpec{name: "good", clusterIPs: []string{vip}}.yaml(allReady("node-a")...),
		"bad.yaml":    bad,
		"broken.yaml": "apiVersion: v1\nkind: Service\nmetadata: {name: x\n  oops: [\n",
	})
	e.waitInspect(10*time.Second, "10.244.1.13:8080")
	deadline := time.Now().Add(5 * time.Second)
	want := []string{"default/badip", "default/badproto", "default/orphan", "broken.yaml"}
	for {
		log := e.agentLog()
		missing := ""
		for _, w := range want {
			if !strings.Contains(log, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent log does not name %s:\n%s", missing, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := tcpN(t, e, e.client(), vip+":80", 10); res.OK != 10 {
		t.Fatalf("the good Service beside bad input: %v", res.Errors)
	}
	metrics := e.scrape()
	for _, w := range []string{`socklb_unusable_objects{kind="Service",object="default/badip"} 1`, `object="default/orphan"`} {
		if !strings.Contains(metrics, w) {
			t.Errorf("metrics lack %s", w)
		}
	}
	if out := e.inspect(); strings.Contains(out, "10.96.0.31") {
		t.Errorf("a port with an unknown protocol was programmed:\n%s", out)
	}
}
